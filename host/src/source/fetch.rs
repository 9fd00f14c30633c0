//! Getting a module's bytes and checking them against the expected digest.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{ObjectRef, Store};
use oci_client::secrets::RegistryAuth;

use super::list::{GuestEntry, ModuleSource, OciEntry};
use super::oci;
use super::signature::{self, Trust};
use crate::runtime::ModuleBytes;

pub use super::limits::MAX_MODULE_BYTES;

/// The most a ConfigMap holds: the API server refuses one whose values
/// (`data` and `binaryData` together; keys do not count) exceed 1 MiB.
pub const CONFIG_MAP_MAX_BYTES: usize = 1 << 20;

/// A module too large for the `configMap` source.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} is {size:.1} MiB, more than a ConfigMap holds (1 MiB): list it in the guest list as `file:` (a mounted volume), `url:` (with its `sha256:`) or `oci:` (`wasmop push`) instead"
)]
pub struct TooLargeForConfigMap {
    /// The module, for people.
    pub what: String,
    /// Its size in MiB.
    pub size: f64,
}

/// The ConfigMap `namespace/name` holding `module` under `binaryData[key]`,
/// for the guest list's `configMap` source; refused when the API server
/// would refuse it.
pub fn module_config_map(
    namespace: &str,
    name: &str,
    key: &str,
    what: &str,
    module: &[u8],
) -> Result<ConfigMap, TooLargeForConfigMap> {
    if module.len() > CONFIG_MAP_MAX_BYTES {
        return Err(TooLargeForConfigMap {
            what: what.to_owned(),
            size: module.len() as f64 / f64::from(1u32 << 20),
        });
    }
    Ok(ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        binary_data: Some([(key.to_owned(), k8s_openapi::ByteString(module.to_vec()))].into()),
        ..Default::default()
    })
}

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
    /// The body at the URL is larger than what is read.
    #[error("cannot fetch {url}: it is larger than {limit} bytes")]
    UrlTooLarge {
        /// URL.
        url: String,
        /// The most read.
        limit: u64,
    },
    /// The registry failed, or its artifact is not a module.
    #[error("cannot fetch oci {0}")]
    Oci(#[from] oci::Error),
    /// The module carries no valid signature by a key that counts.
    #[error("module sha256 {}… refused: {source}", &digest[..digest.len().min(12)])]
    Signature {
        /// The module's sha256.
        digest: String,
        /// Why.
        source: super::signature::Error,
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
            Self::Digest { .. } | Self::Oci(oci::Error::Layer { .. }) => {
                wasmop_contract::Reason::DigestMismatch
            }
            Self::Signature { .. } => wasmop_contract::Reason::SignatureInvalid,
            _ => wasmop_contract::Reason::ModuleFetchFailed,
        }
    }
}

/// Where the guest list's modules are read from: the watched ConfigMaps of
/// the list's namespace, files, URLs and registries; and, per guest, the
/// manifest digest its OCI reference last resolved to and the module that
/// manifest gave.
pub struct Sources {
    configmaps: Store<ConfigMap>,
    namespace: String,
    client: kube::Client,
    /// Per guest: the OCI entry and the manifest digest it resolved to.
    resolved: HashMap<String, (OciEntry, String)>,
    /// Per guest: the OCI entry and manifest digest last pulled and its
    /// module, so an entry edited in fields that do not change how the
    /// registry is reached, or fetched again after a failure of its own (a
    /// wrong `sha256`), pulls no blob again. A manifest digest names its
    /// layer's digest, which the pull checked. One module per OCI guest.
    pulled: HashMap<String, (OciEntry, String, ModuleBytes)>,
    /// What the host trusts (`--require-signed-modules`, `--trusted-keys`);
    /// none: no signature is checked (`wasmop plan` reading the version a
    /// host already checked).
    trust: Option<Trust>,
}

impl Sources {
    /// Sources of the list in `namespace`, whose ConfigMaps `configmaps`
    /// holds; their modules checked for signatures as `trust` says.
    pub fn new(
        configmaps: Store<ConfigMap>,
        namespace: &str,
        client: kube::Client,
        trust: Option<Trust>,
    ) -> Self {
        Self {
            configmaps,
            namespace: namespace.to_owned(),
            client,
            resolved: HashMap::new(),
            pulled: HashMap::new(),
            trust,
        }
    }

    /// The watched ConfigMaps.
    pub fn configmaps(&self) -> &Store<ConfigMap> {
        &self.configmaps
    }

    /// What identifies the bytes `entry`'s source would give now, without
    /// fetching them: the module ConfigMap's resourceVersion, the file's
    /// size and modification time, the URL (whose digest is pinned), the
    /// manifest digest of the OCI reference (resolved once, then by
    /// [`Sources::poll`]). While it stays the same, the module is neither
    /// fetched nor hashed again.
    pub async fn version(&mut self, entry: &GuestEntry) -> String {
        let module = match &entry.module {
            ModuleSource::Oci(reference) => match self.digest(entry).await {
                Ok(digest) => format!("oci {reference}@{digest}"),
                Err(_) => format!("oci {reference}: not resolved"),
            },
            other => self.local_version(other).await,
        };
        match entry.verify.as_ref().and_then(|v| v.bundle.as_ref()) {
            Some(bundle) => format!("{module}, bundle {}", self.local_version(bundle).await),
            None => module,
        }
    }

    /// What identifies the bytes of a `configMap`, `file` or `url` source.
    async fn local_version(&self, source: &ModuleSource) -> String {
        match source {
            ModuleSource::ConfigMap { name, key } => {
                let rv = self
                    .configmaps
                    .get(&ObjectRef::new(name).within(&self.namespace))
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
            ModuleSource::Oci(reference) => format!("oci {reference}"),
        }
    }

    /// Where `entry`'s module can be fetched again, as a guest list
    /// `module` value: an OCI tag pinned to the manifest digest it last
    /// resolved to.
    pub fn pinned(&self, entry: &GuestEntry) -> Option<serde_json::Value> {
        let source = match &entry.module {
            ModuleSource::Oci(reference) => {
                let digest = self.known(&entry.name, &oci_entry(entry))?;
                let parsed = oci::parse_reference(reference).ok()?;
                ModuleSource::Oci(format!(
                    "{}/{}@{digest}",
                    parsed.registry(),
                    parsed.repository()
                ))
            }
            other => other.clone(),
        };
        serde_json::to_value(source).ok()
    }

    /// Resolves `entry`'s OCI reference again. `Ok(true)` when it now names
    /// another manifest than before.
    pub async fn poll(&mut self, entry: &GuestEntry) -> Result<bool, Error> {
        let Some(oci) = entry.oci().ok().flatten() else {
            return Ok(false);
        };
        let digest = self.resolve(&oci).await?;
        let before = self
            .resolved
            .insert(entry.name.clone(), (oci, digest.clone()));
        Ok(before.is_none_or(|(_, d)| d != digest))
    }

    /// Forgets what guests no longer listed resolved to.
    pub fn retain(&mut self, listed: &[&str]) {
        self.resolved
            .retain(|name, _| listed.contains(&name.as_str()));
        self.pulled
            .retain(|name, _| listed.contains(&name.as_str()));
    }

    /// The manifest digest of `entry`'s OCI reference: as last resolved for
    /// this same entry, else resolved now.
    async fn digest(&mut self, entry: &GuestEntry) -> Result<String, Error> {
        let oci = oci_entry(entry);
        if let Some(digest) = self.known(&entry.name, &oci) {
            return Ok(digest);
        }
        let digest = self.resolve(&oci).await?;
        self.resolved
            .insert(entry.name.clone(), (oci, digest.clone()));
        Ok(digest)
    }

    /// What `oci`, as listed for `guest` now, last resolved to.
    fn known(&self, guest: &str, oci: &OciEntry) -> Option<String> {
        self.resolved
            .get(guest)
            .filter(|(known, _)| known == oci)
            .map(|(_, digest)| digest.clone())
    }

    async fn resolve(&self, oci: &OciEntry) -> Result<String, Error> {
        let (registry, reference) = self.registry(oci).await?;
        Ok(registry.resolve(&reference).await?)
    }

    async fn registry(
        &self,
        oci: &OciEntry,
    ) -> Result<(oci::Registry, oci_client::Reference), Error> {
        let reference =
            oci::parse_reference(&oci.reference).expect("an oci reference checked by parse");
        let auth = match &oci.pull_secret {
            Some(secret) => {
                oci::pull_secret_auth(
                    &self.client,
                    &self.namespace,
                    secret,
                    reference.resolve_registry(),
                )
                .await?
            }
            None => RegistryAuth::Anonymous,
        };
        Ok((
            oci::Registry::new(&reference, oci.insecure, auth),
            reference,
        ))
    }

    /// Fetches `entry`'s module and hashes it once.
    pub async fn fetch(&mut self, entry: &GuestEntry) -> Result<ModuleBytes, Error> {
        if !matches!(entry.module, ModuleSource::Oci(_)) {
            self.pulled.remove(&entry.name);
        }
        let bytes = match &entry.module {
            ModuleSource::ConfigMap { name, key } => {
                let cm = self.config_map(name)?;
                cm.binary_data
                    .as_ref()
                    .and_then(|d| d.get(key))
                    .map(|b| b.0.clone())
                    .ok_or_else(|| Error::MissingKey {
                        namespace: self.namespace.clone(),
                        name: name.clone(),
                        key: key.clone(),
                    })?
            }
            ModuleSource::File(path) => {
                tokio::fs::read(path).await.map_err(|source| Error::File {
                    path: path.clone(),
                    source,
                })?
            }
            ModuleSource::Url(url) => {
                let url = url.clone();
                tokio::task::spawn_blocking(move || download(&url, MAX_MODULE_BYTES))
                    .await
                    .map_err(|e| Error::Url {
                        url: String::new(),
                        reason: e.to_string(),
                    })??
            }
            ModuleSource::Oci(_) => {
                // One client (one read of the pull Secret) for resolving
                // and pulling.
                let oci = oci_entry(entry);
                let (registry, reference) = self.registry(&oci).await?;
                let digest = match self.known(&entry.name, &oci) {
                    Some(digest) => digest,
                    None => {
                        let digest = registry.resolve(&reference).await?;
                        self.resolved
                            .insert(entry.name.clone(), (oci.clone(), digest.clone()));
                        digest
                    }
                };
                let module = match self.pulled.get(&entry.name) {
                    Some((from, pulled, module))
                        if *pulled == digest && same_registry_access(from, &oci) =>
                    {
                        module.clone()
                    }
                    _ => {
                        let module = registry.pull(&reference, &digest).await?;
                        self.pulled
                            .insert(entry.name.clone(), (oci, digest.clone(), module.clone()));
                        module
                    }
                };
                verify(entry.sha256.as_deref(), &module)?;
                if let Some(keys) = self.keys_for(entry, &module)? {
                    let checked = tokio::time::timeout(
                        signature::VERIFY_TIMEOUT,
                        signature::registry::verify(&registry, &reference, &digest, &keys),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(signature::Error::Fetch(format!(
                            "the registry's signatures were not read within {:?}",
                            signature::VERIFY_TIMEOUT
                        )))
                    });
                    checked.map_err(|source| refused(&module, source))?;
                }
                return Ok(module);
            }
        };
        let module = ModuleBytes::new(bytes);
        verify(entry.sha256.as_deref(), &module)?;
        if let Some(keys) = self.keys_for(entry, &module)? {
            let bundle = self
                .bundle(entry)
                .await
                .map_err(|source| refused(&module, source))?;
            signature::bundle::verify_blob(&bundle, module.bytes(), module.digest(), &keys)
                .map_err(|source| refused(&module, source))?;
        }
        Ok(module)
    }

    /// The ConfigMap `name` of the list's namespace, as the watch last saw
    /// it.
    fn config_map(&self, name: &str) -> Result<std::sync::Arc<ConfigMap>, Error> {
        self.configmaps
            .get(&ObjectRef::new(name).within(&self.namespace))
            .ok_or_else(|| Error::ConfigMap {
                namespace: self.namespace.clone(),
                name: name.to_owned(),
            })
    }

    /// The keys `entry`'s module must be signed by, none when it needs no
    /// signature.
    fn keys_for(
        &self,
        entry: &GuestEntry,
        module: &ModuleBytes,
    ) -> Result<Option<signature::Keys>, Error> {
        let Some(trust) = &self.trust else {
            return Ok(None);
        };
        trust
            .keys_for(entry.verify.as_ref().map(|v| v.keys.as_slice()))
            .map_err(|source| refused(module, source))
    }

    /// The bytes of `entry`'s `verify.bundle`, at most
    /// [`signature::MAX_BUNDLE_BYTES`].
    async fn bundle(&self, entry: &GuestEntry) -> Result<Vec<u8>, signature::Error> {
        let max = signature::MAX_BUNDLE_BYTES;
        let too_large = |size: Option<u64>| {
            signature::Error::Malformed(format!(
                "the bundle is {}larger than the {} KiB a bundle may take",
                size.map_or_else(String::new, |s| format!("{s} bytes, ")),
                max >> 10
            ))
        };
        let Some(source) = entry.verify.as_ref().and_then(|v| v.bundle.as_ref()) else {
            return Err(signature::Error::Missing(
                "the entry names no verify.bundle: a url, file or configMap module's signature is the bundle `cosign sign-blob --bundle` writes".into(),
            ));
        };
        let fetch = |why: String| signature::Error::Fetch(why);
        match source {
            ModuleSource::ConfigMap { name, key } => {
                let cm = self
                    .config_map(name)
                    .map_err(|e| signature::Error::Missing(e.to_string()))?;
                let bytes = cm
                    .binary_data
                    .as_ref()
                    .and_then(|d| d.get(key))
                    .map(|b| b.0.clone())
                    .or_else(|| {
                        cm.data
                            .as_ref()
                            .and_then(|d| d.get(key))
                            .map(|t| t.clone().into_bytes())
                    })
                    .ok_or_else(|| {
                        signature::Error::Missing(format!(
                            "ConfigMap {}/{name} has no key {key:?}",
                            self.namespace
                        ))
                    })?;
                if bytes.len() as u64 > max {
                    return Err(too_large(Some(bytes.len() as u64)));
                }
                Ok(bytes)
            }
            ModuleSource::File(path) => {
                let size = tokio::fs::metadata(path)
                    .await
                    .map_err(|e| fetch(format!("cannot read bundle file {path}: {e}")))?
                    .len();
                if size > max {
                    return Err(too_large(Some(size)));
                }
                let bytes = tokio::fs::read(path)
                    .await
                    .map_err(|e| fetch(format!("cannot read bundle file {path}: {e}")))?;
                if bytes.len() as u64 > max {
                    return Err(too_large(Some(bytes.len() as u64)));
                }
                Ok(bytes)
            }
            ModuleSource::Url(url) => {
                let url = url.clone();
                tokio::task::spawn_blocking(move || download(&url, max))
                    .await
                    .map_err(|e| fetch(e.to_string()))?
                    .map_err(|e| match e {
                        Error::UrlTooLarge { .. } => too_large(None),
                        other => fetch(other.to_string()),
                    })
            }
            ModuleSource::Oci(_) => Err(signature::Error::Malformed(
                "verify.bundle takes file, url or configMap".into(),
            )),
        }
    }
}

/// Whether `a` and `b` reach the same registry the same way: the same
/// reference, transport and credentials (the poll interval aside).
fn same_registry_access(a: &OciEntry, b: &OciEntry) -> bool {
    a.reference == b.reference && a.insecure == b.insecure && a.pull_secret == b.pull_secret
}

/// The `oci` settings of an entry with an OCI source (checked by parse).
fn oci_entry(entry: &GuestEntry) -> OciEntry {
    entry
        .oci()
        .ok()
        .flatten()
        .expect("an oci source with settings checked by parse")
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

/// `module`'s refusal for `source`.
fn refused(module: &ModuleBytes, source: signature::Error) -> Error {
    Error::Signature {
        digest: module.digest().to_owned(),
        source,
    }
}

/// The body at `url`, at most `limit` bytes.
fn download(url: &str, limit: u64) -> Result<Vec<u8>, Error> {
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
        .limit(limit)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => Error::UrlTooLarge {
                url: url.to_owned(),
                limit,
            },
            e => err(e.to_string()),
        })
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
