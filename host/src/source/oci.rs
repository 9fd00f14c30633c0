//! Modules in OCI registries, as the CNCF wasm artifact: an image manifest
//! (`application/vnd.oci.image.manifest.v1+json`) whose config is
//! `application/vnd.wasm.config.v0+json` and whose one layer is the
//! component (`application/wasm`). The registry protocol is `oci-client`'s.
//!
//! A reference names its registry explicitly (`<registry>/<repository>:<tag>`
//! or `…@sha256:<digest>`): there is no default registry. TLS is required
//! unless the entry says `insecure: true`. Credentials come from a
//! `kubernetes.io/dockerconfigjson` Secret; each operation builds its own
//! client, so a rotated Secret applies at the next poll.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageIndex, OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::limits::MAX_MODULE_BYTES;
use crate::runtime::ModuleBytes;

/// Media type of the artifact's config (interface contract).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Media type of its one layer, the component (interface contract).
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Media type of the manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The type of the Secret `pullSecret` names.
pub const PULL_SECRET_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// How often a tag is resolved again, unless `ociPollInterval` says.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(60);

/// How long one registry operation may take in all.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to a registry may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The registry failed or refused.
    #[error("{reference}: {reason}")]
    Registry {
        /// The reference.
        reference: String,
        /// Why.
        reason: String,
    },
    /// The pull Secret is missing or unusable.
    #[error("pull Secret {namespace}/{name}: {reason}")]
    PullSecret {
        /// Namespace of the guest list.
        namespace: String,
        /// Secret name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The bytes of the layer are not the ones the manifest names.
    #[error(
        "{reference}: layer digest mismatch: the manifest names {expected}, the bytes are {actual}"
    )]
    Layer {
        /// The reference.
        reference: String,
        /// From the manifest.
        expected: String,
        /// Of the bytes.
        actual: String,
    },
}

/// Parses an `oci` reference: the registry must be named, and a tag or
/// digest given.
pub fn parse_reference(text: &str) -> Result<Reference, String> {
    let first = text.split('/').next().unwrap_or_default();
    let names_registry =
        text.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if !names_registry {
        return Err(format!(
            "oci reference {text:?} must start with its registry, as in registry.example.com/ops/cache:v1"
        ));
    }
    let last = text.rsplit('/').next().unwrap_or_default();
    if !last.contains(':') && !last.contains('@') {
        return Err(format!(
            "oci reference {text:?} names no tag or digest (add :<tag> or @sha256:<digest>)"
        ));
    }
    let reference: Reference = text
        .parse()
        .map_err(|e| format!("oci reference {text:?} is invalid: {e}"))?;
    if let Some(digest) = reference.digest()
        && !is_sha256(digest)
    {
        return Err(format!(
            "oci reference {text:?}: the digest must be sha256:<64 hex digits>"
        ));
    }
    Ok(reference)
}

fn is_sha256(digest: &str) -> bool {
    digest
        .strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// One registry and the way to reach it.
#[derive(Clone)]
pub struct Registry {
    client: Client,
    auth: RegistryAuth,
}

impl Registry {
    /// A client for `reference`'s registry: plain HTTP only when `insecure`.
    pub fn new(reference: &Reference, insecure: bool, auth: RegistryAuth) -> Self {
        crate::client::install_crypto_provider();
        let protocol = if insecure {
            ClientProtocol::HttpsExcept(vec![reference.resolve_registry().to_owned()])
        } else {
            ClientProtocol::Https
        };
        let client = Client::new(ClientConfig {
            protocol,
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(OPERATION_TIMEOUT),
            // No image indexes: a wasm artifact is one manifest.
            platform_resolver: None,
            ..ClientConfig::default()
        });
        Self { client, auth }
    }

    /// The manifest digest `reference` names now: its own digest when it has
    /// one (no request), else what its tag resolves to.
    pub async fn resolve(&self, reference: &Reference) -> Result<String, Error> {
        if let Some(digest) = reference.digest() {
            return Ok(digest.to_owned());
        }
        let digest = self
            .timed(
                reference,
                self.client.fetch_manifest_digest(reference, &self.auth),
            )
            .await?;
        if !is_sha256(&digest) {
            return Err(registry_error(
                reference,
                format!("the registry answered digest {digest:?}, not sha256:<hex>"),
            ));
        }
        Ok(digest)
    }

    /// The component of the wasm artifact whose manifest has `digest`, in
    /// `reference`'s repository. Its layer is checked against the manifest
    /// (the caller checks the entry's `sha256`).
    pub async fn pull(&self, reference: &Reference, digest: &str) -> Result<ModuleBytes, Error> {
        let pinned = Reference::with_digest(
            reference.registry().to_owned(),
            reference.repository().to_owned(),
            digest.to_owned(),
        );
        let (manifest, _) = self
            .timed(&pinned, self.client.pull_manifest(&pinned, &self.auth))
            .await?;
        let layer = wasm_layer(&pinned, manifest)?;
        let expected = layer.digest.clone();
        let bytes = self.blob(&pinned, &layer, MAX_MODULE_BYTES).await?;
        let module = ModuleBytes::new(bytes);
        let actual = format!("sha256:{}", module.digest());
        if !actual.eq_ignore_ascii_case(&expected) {
            return Err(Error::Layer {
                reference: pinned.whole(),
                expected,
                actual,
            });
        }
        Ok(module)
    }

    /// Publishes `module` at `reference` as a wasm artifact and returns the
    /// manifest digest.
    pub async fn push(&self, reference: &Reference, module: Vec<u8>) -> Result<String, Error> {
        let layer = ImageLayer::new(module, LAYER_MEDIA_TYPE.to_owned(), None);
        let layer_digest = layer.sha256_digest();
        let config = Config::new(
            serde_json::to_vec(&serde_json::json!({
                "architecture": "wasm",
                "os": "wasip2",
                "layerDigests": [layer_digest],
            }))
            .expect("a JSON value serialises"),
            CONFIG_MEDIA_TYPE.to_owned(),
            None,
        );
        let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
        self.timed(
            reference,
            self.client
                .push(reference, &[layer], config, &self.auth, Some(manifest)),
        )
        .await?;
        self.timed(
            reference,
            self.client.fetch_manifest_digest(reference, &self.auth),
        )
        .await
    }

    /// The blob `layer` of `reference`'s repository, refused past `max`
    /// bytes and after [`OPERATION_TIMEOUT`].
    pub(in crate::source) async fn blob(
        &self,
        reference: &Reference,
        layer: &OciDescriptor,
        max: u64,
    ) -> Result<Vec<u8>, Error> {
        if !(0..=max as i64).contains(&layer.size) {
            return Err(registry_error(
                reference,
                format!(
                    "the blob {} is {} bytes, at most {max} are read",
                    layer.digest, layer.size
                ),
            ));
        }
        tokio::time::timeout(OPERATION_TIMEOUT, async {
            let mut stream = self
                .client
                .pull_blob_stream(reference, layer)
                .await
                .map_err(|e| registry_error(reference, e.to_string()))?;
            let mut bytes = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| registry_error(reference, e.to_string()))?;
                if (bytes.len() + chunk.len()) as u64 > max {
                    return Err(registry_error(
                        reference,
                        format!("the blob {} exceeds {max} bytes", layer.digest),
                    ));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(bytes)
        })
        .await
        .map_err(|_| registry_error(reference, format!("no blob within {OPERATION_TIMEOUT:?}")))?
    }

    /// The image manifest `reference` names, none when the registry has no
    /// such manifest.
    pub(in crate::source) async fn image_manifest(
        &self,
        reference: &Reference,
    ) -> Result<Option<OciImageManifest>, Error> {
        match self
            .timed_found(reference, self.client.pull_manifest(reference, &self.auth))
            .await?
        {
            Some((OciManifest::Image(manifest), _)) => Ok(Some(manifest)),
            Some((OciManifest::ImageIndex(_), _)) => Err(registry_error(
                reference,
                "an image index, not an image manifest".into(),
            )),
            None => Ok(None),
        }
    }

    /// The manifests that name `subject` (a reference by digest) and are
    /// of `artifact_type`: from the registry's referrers API, else from
    /// its tag fallback `sha256-<hex>`.
    pub(in crate::source) async fn referrers(
        &self,
        subject: &Reference,
        artifact_type: &str,
    ) -> Result<OciImageIndex, Error> {
        self.client
            .store_auth_if_needed(subject.resolve_registry(), &self.auth)
            .await;
        self.timed(
            subject,
            self.client.pull_referrers(subject, Some(artifact_type)),
        )
        .await
    }

    /// The raw manifest `reference` names, none when the registry has
    /// none.
    pub(in crate::source) async fn raw_manifest(
        &self,
        reference: &Reference,
        accepted: &[&str],
    ) -> Result<Option<Vec<u8>>, Error> {
        let found = self
            .timed_found(
                reference,
                self.client
                    .pull_manifest_raw(reference, &self.auth, accepted),
            )
            .await?;
        Ok(found.map(|(bytes, _)| bytes.to_vec()))
    }

    /// Stores `data` as a blob of `reference`'s repository.
    pub(in crate::source) async fn push_blob(
        &self,
        reference: &Reference,
        data: Vec<u8>,
        digest: &str,
    ) -> Result<(), Error> {
        self.client
            .store_auth_if_needed(reference.resolve_registry(), &self.auth)
            .await;
        self.timed(reference, self.client.push_blob(reference, data, digest))
            .await
            .map(drop)
    }

    /// Stores the manifest `body` of `media_type` at `reference` (a tag or
    /// its digest).
    pub(in crate::source) async fn push_manifest(
        &self,
        reference: &Reference,
        body: Vec<u8>,
        media_type: &'static str,
    ) -> Result<(), Error> {
        self.client
            .store_auth_if_needed(reference.resolve_registry(), &self.auth)
            .await;
        self.timed(
            reference,
            self.client.push_manifest_raw(
                reference,
                body,
                http::HeaderValue::from_static(media_type),
            ),
        )
        .await
        .map(drop)
    }

    /// [`Registry::timed`], with the registry's "no such manifest" as none.
    async fn timed_found<T>(
        &self,
        reference: &Reference,
        operation: impl Future<Output = oci_client::errors::Result<T>>,
    ) -> Result<Option<T>, Error> {
        match tokio::time::timeout(OPERATION_TIMEOUT, operation).await {
            Ok(Ok(found)) => Ok(Some(found)),
            Ok(Err(e)) if is_not_found(&e) => Ok(None),
            Ok(Err(e)) => Err(registry_error(reference, one_line(&e))),
            Err(_) => Err(registry_error(
                reference,
                format!("no answer within {OPERATION_TIMEOUT:?}"),
            )),
        }
    }

    async fn timed<T>(
        &self,
        reference: &Reference,
        operation: impl Future<Output = oci_client::errors::Result<T>>,
    ) -> Result<T, Error> {
        match tokio::time::timeout(OPERATION_TIMEOUT, operation).await {
            Ok(result) => result.map_err(|e| registry_error(reference, one_line(&e))),
            Err(_) => Err(registry_error(
                reference,
                format!("no answer within {OPERATION_TIMEOUT:?}"),
            )),
        }
    }
}

/// Whether the registry answered that it has no such manifest.
fn is_not_found(error: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode as Code};
    match error {
        E::ImageManifestNotFoundError(_) | E::ServerError { code: 404, .. } => true,
        E::RegistryError { envelope, .. } => envelope
            .errors
            .iter()
            .any(|e| matches!(e.code, Code::ManifestUnknown | Code::NotFound)),
        _ => false,
    }
}

/// The one `application/wasm` layer of a wasm artifact's manifest.
fn wasm_layer(reference: &Reference, manifest: OciManifest) -> Result<OciDescriptor, Error> {
    let bad = |why: String| registry_error(reference, format!("not a wasm artifact: {why}"));
    let OciManifest::Image(manifest) = manifest else {
        return Err(bad("an image index, not an image manifest".into()));
    };
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(bad(format!(
            "config media type {:?}, expected {CONFIG_MEDIA_TYPE}",
            manifest.config.media_type
        )));
    }
    let [layer] = <[OciDescriptor; 1]>::try_from(manifest.layers)
        .map_err(|layers| bad(format!("{} layers, expected one", layers.len())))?;
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(bad(format!(
            "layer media type {:?}, expected {LAYER_MEDIA_TYPE}",
            layer.media_type
        )));
    }
    if !(0..=MAX_MODULE_BYTES as i64).contains(&layer.size) {
        return Err(bad(format!(
            "the layer is {} bytes, at most {MAX_MODULE_BYTES} are accepted",
            layer.size
        )));
    }
    if !is_sha256(&layer.digest) {
        return Err(bad(format!(
            "layer digest {:?} is not sha256",
            layer.digest
        )));
    }
    Ok(layer)
}

fn registry_error(reference: &Reference, reason: String) -> Error {
    Error::Registry {
        reference: reference.whole(),
        reason,
    }
}

/// An error and its sources on one line (oci-client's errors wrap reqwest's,
/// whose own message omits the cause, e.g. "connection refused").
fn one_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The credentials for `registry` in the `kubernetes.io/dockerconfigjson`
/// Secret `name` of `namespace`.
pub async fn pull_secret_auth(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    registry: &str,
) -> Result<RegistryAuth, Error> {
    let bad = |reason: String| Error::PullSecret {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        reason,
    };
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| bad(e.to_string()))?
        .ok_or_else(|| bad("does not exist".into()))?;
    if secret.type_.as_deref() != Some(PULL_SECRET_TYPE) {
        return Err(bad(format!(
            "is of type {:?}, not {PULL_SECRET_TYPE}",
            secret.type_.unwrap_or_default()
        )));
    }
    let config = secret
        .data
        .as_ref()
        .and_then(|d| d.get(".dockerconfigjson"))
        .ok_or_else(|| bad("has no .dockerconfigjson key".into()))?;
    docker_config_auth(&config.0, registry).map_err(bad)
}

/// The entry for `registry` in a docker config JSON: `auths.<registry>`
/// with `auth` (base64 of `user:password`) or `username` and `password`.
/// Keys may carry a scheme and a path (`https://host/v1/`).
pub fn docker_config_auth(json: &[u8], registry: &str) -> Result<RegistryAuth, String> {
    use base64::Engine as _;
    #[derive(serde::Deserialize)]
    struct DockerConfig {
        #[serde(default)]
        auths: std::collections::BTreeMap<String, Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        auth: Option<String>,
        username: Option<String>,
        password: Option<String>,
    }
    let config: DockerConfig = serde_json::from_slice(json)
        .map_err(|e| format!(".dockerconfigjson is not a docker config: {e}"))?;
    let host = |key: &str| {
        let key = key
            .strip_prefix("https://")
            .or_else(|| key.strip_prefix("http://"))
            .unwrap_or(key);
        key.split('/').next().unwrap_or_default().to_owned()
    };
    let entry = config
        .auths
        .iter()
        .find(|(key, _)| host(key) == registry)
        .map(|(_, entry)| entry)
        .ok_or_else(|| format!("has no credentials for registry {registry}"))?;
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
    }
    let auth = entry.auth.as_deref().ok_or_else(|| {
        format!("the entry for {registry} has neither auth nor username and password")
    })?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .map_err(|_| format!("the auth of {registry} is not base64"))?;
    let decoded =
        String::from_utf8(decoded).map_err(|_| format!("the auth of {registry} is not UTF-8"))?;
    let (user, password) = decoded
        .split_once(':')
        .ok_or_else(|| format!("the auth of {registry} is not user:password"))?;
    Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_registry_and_a_tag_or_digest() {
        let r = parse_reference("127.0.0.1:5000/ops/cache:v1").unwrap();
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("127.0.0.1:5000", "ops/cache", Some("v1"))
        );
        let pinned = format!("registry.example.com/cache@sha256:{}", "a".repeat(64));
        assert!(parse_reference(&pinned).unwrap().digest().is_some());
        for bad in [
            "cache:v1",
            "ops/cache:v1",
            "registry.example.com/cache",
            "registry.example.com/cache@sha256:abc",
            "registry.example.com/UPPER:v1",
        ] {
            assert!(parse_reference(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn docker_config_credentials_match_the_registry_host() {
        let json = br#"{"auths":{"https://other.io/v1/":{"auth":"eDp5"},
            "127.0.0.1:5000":{"auth":"dXNlcjpwYXNzOndvcmQ="}}}"#;
        assert_eq!(
            docker_config_auth(json, "127.0.0.1:5000").unwrap(),
            RegistryAuth::Basic("user".into(), "pass:word".into())
        );
        assert_eq!(
            docker_config_auth(json, "other.io").unwrap(),
            RegistryAuth::Basic("x".into(), "y".into())
        );
        let err = docker_config_auth(json, "third.io").unwrap_err();
        assert!(
            err.contains("no credentials for registry third.io"),
            "{err}"
        );
        let plain = br#"{"auths":{"r.io":{"username":"u","password":"p"}}}"#;
        assert_eq!(
            docker_config_auth(plain, "r.io").unwrap(),
            RegistryAuth::Basic("u".into(), "p".into())
        );
        assert!(docker_config_auth(b"[]", "r.io").is_err());
    }

    #[test]
    fn only_a_single_wasm_layer_under_the_wasm_config_is_a_module() {
        let r = parse_reference("r.io/m:v1").unwrap();
        let layer = OciDescriptor {
            media_type: LAYER_MEDIA_TYPE.into(),
            digest: format!("sha256:{}", "b".repeat(64)),
            size: 10,
            ..OciDescriptor::default()
        };
        let manifest = |config: &str, layers: Vec<OciDescriptor>| {
            let mut m = OciImageManifest::default();
            m.config.media_type = config.into();
            m.layers = layers;
            OciManifest::Image(m)
        };
        assert!(wasm_layer(&r, manifest(CONFIG_MEDIA_TYPE, vec![layer.clone()])).is_ok());
        let image = manifest(
            "application/vnd.oci.image.config.v1+json",
            vec![layer.clone()],
        );
        assert!(
            wasm_layer(&r, image)
                .unwrap_err()
                .to_string()
                .contains("config media type")
        );
        let two = manifest(CONFIG_MEDIA_TYPE, vec![layer.clone(), layer.clone()]);
        assert!(
            wasm_layer(&r, two)
                .unwrap_err()
                .to_string()
                .contains("2 layers")
        );
        let huge = OciDescriptor {
            size: MAX_MODULE_BYTES as i64 + 1,
            ..layer.clone()
        };
        assert!(wasm_layer(&r, manifest(CONFIG_MEDIA_TYPE, vec![huge])).is_err());
        let tar = OciDescriptor {
            media_type: "application/vnd.oci.image.layer.v1.tar".into(),
            ..layer
        };
        assert!(wasm_layer(&r, manifest(CONFIG_MEDIA_TYPE, vec![tar])).is_err());
    }
}
