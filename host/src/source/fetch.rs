//! Getting a module's bytes and checking them against the expected digest.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{ObjectRef, Store};

use super::list::{GuestEntry, ModuleSource};
use crate::runtime::ModuleBytes;

/// Largest module accepted from any source. A guest component is typically
/// 0.1–2 MiB; a ConfigMap cannot hold more than ~1 MiB anyway.
pub const MAX_MODULE_BYTES: u64 = 64 << 20;

/// How long an HTTP download may take.
const URL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a module could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ConfigMap does not exist.
    #[error("ConfigMap {namespace}/{name} does not exist")]
    ConfigMap {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The ConfigMap exists but lacks the key.
    #[error("ConfigMap {namespace}/{name} has no binaryData key {key:?}")]
    MissingKey {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Key.
        key: String,
    },
    /// The file cannot be read.
    #[error("cannot read module file {path}: {source}")]
    File {
        /// Path.
        path: String,
        /// IO error.
        source: std::io::Error,
    },
    /// The URL cannot be fetched.
    #[error("cannot fetch {url}: {reason}")]
    Url {
        /// URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The bytes do not match the expected digest.
    #[error("digest mismatch: expected sha256 {expected}, got {actual}")]
    Digest {
        /// From the guest list.
        expected: String,
        /// Of the bytes fetched.
        actual: String,
    },
}

impl Error {
    /// The Event reason for this failure.
    pub fn reason(&self) -> wasmop_contract::Reason {
        match self {
            Self::Digest { .. } => wasmop_contract::Reason::DigestMismatch,
            _ => wasmop_contract::Reason::ModuleFetchFailed,
        }
    }
}

/// What identifies the bytes `entry`'s source would give now, without
/// fetching them: the module ConfigMap's resourceVersion, the file's size
/// and modification time, the URL (whose digest is pinned). While it stays
/// the same, the module is neither fetched nor hashed again.
pub async fn version(configmaps: &Store<ConfigMap>, namespace: &str, entry: &GuestEntry) -> String {
    match &entry.module {
        ModuleSource::ConfigMap { name, key } => {
            let rv = configmaps
                .get(&ObjectRef::new(name).within(namespace))
                .and_then(|cm| cm.metadata.resource_version.clone())
                .unwrap_or_default();
            format!("configMap {name}/{key}@{rv}")
        }
        ModuleSource::File(path) => match tokio::fs::metadata(path).await {
            Ok(meta) => format!(
                "file {path} {} bytes, modified {:?}",
                meta.len(),
                meta.modified().ok()
            ),
            Err(e) => format!("file {path}: {e}"),
        },
        ModuleSource::Url(url) => format!("url {url}"),
    }
}

/// Fetches `entry`'s module and hashes it once. ConfigMap sources are read
/// from `configmaps`, the watched ConfigMaps of `namespace`.
pub async fn fetch(
    configmaps: &Store<ConfigMap>,
    namespace: &str,
    entry: &GuestEntry,
) -> Result<ModuleBytes, Error> {
    let bytes = match &entry.module {
        ModuleSource::ConfigMap { name, key } => {
            let cm = configmaps
                .get(&ObjectRef::new(name).within(namespace))
                .ok_or_else(|| Error::ConfigMap {
                    namespace: namespace.into(),
                    name: name.clone(),
                })?;
            cm.binary_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
                .ok_or_else(|| Error::MissingKey {
                    namespace: namespace.into(),
                    name: name.clone(),
                    key: key.clone(),
                })?
        }
        ModuleSource::File(path) => tokio::fs::read(path).await.map_err(|source| Error::File {
            path: path.clone(),
            source,
        })?,
        ModuleSource::Url(url) => {
            let url = url.clone();
            tokio::task::spawn_blocking(move || download(&url))
                .await
                .map_err(|e| Error::Url {
                    url: String::new(),
                    reason: e.to_string(),
                })??
        }
    };
    let module = ModuleBytes::new(bytes);
    verify(entry.sha256.as_deref(), &module)?;
    Ok(module)
}

/// Checks `module` against `expected` (hex sha256), if given.
pub fn verify(expected: Option<&str>, module: &ModuleBytes) -> Result<(), Error> {
    if let Some(expected) = expected
        && !module.digest().eq_ignore_ascii_case(expected)
    {
        return Err(Error::Digest {
            expected: expected.to_string(),
            actual: module.digest().to_owned(),
        });
    }
    Ok(())
}

fn download(url: &str) -> Result<Vec<u8>, Error> {
    let err = |reason: String| Error::Url {
        url: url.to_string(),
        reason,
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(URL_TIMEOUT))
        .build()
        .into();
    let mut response = agent.get(url).call().map_err(|e| err(e.to_string()))?;
    response
        .body_mut()
        .with_config()
        .limit(MAX_MODULE_BYTES)
        .read_to_vec()
        .map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_digest_is_refused_and_a_right_one_passes() {
        let module = ModuleBytes::new(b"\0asm".to_vec());
        assert!(verify(Some(&module.digest().to_uppercase()), &module).is_ok());
        assert!(verify(None, &module).is_ok());
        let err = verify(Some(&"0".repeat(64)), &module).unwrap_err();
        assert!(err.to_string().contains("digest mismatch"));
    }
}
