//! The `Cache` custom resource (`apps.example.com/v1alpha1`), as the seeds'
//! kubebuilder types define it, plus `config` and `paused`.
//!
//! `deploy/crds/cache.yaml` is the schema the API server enforces; the guest
//! validates the same bounds again so a wrong spec becomes a clear permanent
//! error instead of a broken Deployment.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use k8s_openapi::{NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};
use wasmop_guest::{Error, Result};

/// Replicas when the spec leaves them out (the CRD defaults them too).
pub const DEFAULT_REPLICAS: i32 = 1;
/// Port when the spec leaves it out: Redis's.
pub const DEFAULT_PORT: i32 = 6379;
/// The largest `replicas` the CRD allows.
pub const MAX_REPLICAS: i32 = 10;
/// How long a change of `spec.image` may take to become Ready when
/// `spec.upgrade.timeoutSeconds` is absent (the CRD defaults it too).
pub const DEFAULT_UPGRADE_TIMEOUT_SECONDS: i32 = 300;
/// The bounds of `spec.upgrade.timeoutSeconds` the CRD enforces: from a
/// rollout Kubernetes can tell stuck after a few resyncs to an hour.
pub const UPGRADE_TIMEOUT_SECONDS: std::ops::RangeInclusive<i32> = 30..=3600;

/// A cache: a Deployment of `image` behind a Service, configured through a
/// ConfigMap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cache {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the user asks for.
    #[serde(default)]
    pub spec: CacheSpec,
    /// What the operator last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CacheStatus>,
}

impl Resource for Cache {
    const API_VERSION: &'static str = "apps.example.com/v1alpha1";
    const GROUP: &'static str = "apps.example.com";
    const KIND: &'static str = "Cache";
    const VERSION: &'static str = "v1alpha1";
    const URL_PATH_SEGMENT: &'static str = "caches";
    type Scope = NamespaceResourceScope;
}

impl Cache {
    /// The cache's name ("" if unnamed, which the API server never sends).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

/// The desired state of a [`Cache`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheSpec {
    /// Container image, e.g. `redis:7.2`; when empty, the setting
    /// `defaultImage` ([`CacheSettings`]) is used.
    #[serde(default)]
    pub image: String,
    /// Number of pods, 1 to 10; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Port the container listens on and the Service exposes, 1 to 65535;
    /// default 6379.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Configuration files: rendered into the ConfigMap `<name>-config` and
    /// mounted into the pods at `/etc/cache`, one file per key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
    /// While true the operator leaves every child exactly as it is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Credentials the cache server requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<CacheAuth>,
    /// How a change of `image` rolls out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<CacheUpgrade>,
}

/// `spec.upgrade`: how long a new image may take to become Ready.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheUpgrade {
    /// Seconds a rollout of a new image may go without progress before it
    /// is rolled back: the Deployment's `progressDeadlineSeconds`, 30 to
    /// 3600; default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
}

/// `spec.auth`: where the cache server's password is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheAuth {
    /// The key of a Secret in the Cache's namespace holding the password.
    #[serde(default)]
    pub secret_ref: SecretKeyRef,
}

/// A key of a Secret in the Cache's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[serde(default)]
    pub name: String,
    /// The key in its `data`.
    #[serde(default)]
    pub key: String,
}

/// The guest-list entry's `settings` for the cache-operator.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CacheSettings {
    /// The image of a Cache whose `spec.image` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_image: Option<String>,
    /// The API group of the Cache kind to reconcile (default
    /// `apps.example.com`): one module serves the same CRD under several
    /// groups, one guest name each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// The Cache version the guest reconciles: `v1alpha1` (default) or
    /// `v1beta1`, the storage version of the CRD with both. Objects reach
    /// `reconcile` in it; the logic reads both shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// An external registry every Ready Cache is registered with, and
    /// removed from before its finalizer goes (`crate::registry`): an
    /// `http://` or `https://` base URL, which the guest-list entry must
    /// also grant in `allowedOutboundHosts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_url: Option<String>,
}

impl CacheSettings {
    /// The settings as `describe` checks them: an empty `defaultImage` is
    /// refused.
    pub fn parse(settings: &wasmop_guest::Settings) -> std::result::Result<Self, String> {
        let parsed: Self = settings.get()?;
        if parsed
            .default_image
            .as_deref()
            .is_some_and(|i| i.trim().is_empty())
        {
            return Err("settings.defaultImage must not be empty".into());
        }
        if let Some(group) = parsed.api_group.as_deref()
            && (!group.contains('.')
                || group.len() > 253
                || !group.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
                }))
        {
            return Err(format!(
                "settings.apiGroup {group:?} is not an API group (a lowercase DNS name with a dot)"
            ));
        }
        if let Some(version) = parsed.version.as_deref()
            && ![crate::conversion::V1ALPHA1, crate::conversion::V1BETA1].contains(&version)
        {
            return Err(format!(
                "settings.version {version:?} is not a Cache version (v1alpha1 or v1beta1)"
            ));
        }
        if parsed.registry_url.is_some()
            && cfg!(target_arch = "wasm32")
            && !cfg!(feature = "registry")
        {
            return Err(
                "settings.registryUrl needs the cache-operator-registry build, which imports outbound HTTP"
                    .into(),
            );
        }
        if let Some(url) = parsed.registry_url.as_deref()
            && !((url.starts_with("http://") || url.starts_with("https://"))
                && url
                    .split_once("://")
                    .is_some_and(|(_, rest)| !rest.is_empty())
                && !url.contains(['?', '#', '@']))
        {
            return Err(format!(
                "settings.registryUrl {url:?} must be an http:// or https:// URL without user info or query"
            ));
        }
        Ok(parsed)
    }
}

impl CacheSettings {
    /// The Cache version reconciled: `version`, default `v1alpha1`.
    pub fn version(&self) -> &str {
        self.version
            .as_deref()
            .unwrap_or(crate::conversion::V1ALPHA1)
    }
}

impl CacheSpec {
    /// Replicas with the default applied.
    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(DEFAULT_REPLICAS)
    }

    /// Port with the default applied.
    pub fn port(&self) -> i32 {
        self.port.unwrap_or(DEFAULT_PORT)
    }

    /// `upgrade.timeoutSeconds` with the default applied.
    pub fn upgrade_timeout_seconds(&self) -> i32 {
        self.upgrade
            .as_ref()
            .and_then(|u| u.timeout_seconds)
            .unwrap_or(DEFAULT_UPGRADE_TIMEOUT_SECONDS)
    }

    /// The spec with `settings` applied: an empty `image` becomes the
    /// setting `defaultImage`.
    #[must_use]
    pub fn with_defaults(mut self, settings: &CacheSettings) -> Self {
        if self.image.trim().is_empty()
            && let Some(image) = &settings.default_image
        {
            self.image.clone_from(image);
        }
        self
    }

    /// Checks the bounds the CRD declares, and that every config key is a
    /// valid ConfigMap key. A violation is permanent: retrying cannot fix it.
    pub fn validate(&self) -> Result<()> {
        if self.image.trim().is_empty() {
            return Err(Error::permanent(
                "spec.image must not be empty (this guest has no setting defaultImage)",
            ));
        }
        if let Some(auth) = &self.auth {
            let secret = &auth.secret_ref;
            if secret.name.is_empty() || secret.name.len() > 253 {
                return Err(Error::permanent(
                    "spec.auth.secretRef.name must be 1 to 253 characters",
                ));
            }
            if !is_config_map_key(&secret.key) {
                return Err(Error::permanent(format!(
                    "spec.auth.secretRef.key {:?} is not a valid Secret key",
                    secret.key
                )));
            }
        }
        let replicas = self.replicas();
        if !(1..=MAX_REPLICAS).contains(&replicas) {
            return Err(Error::permanent(format!(
                "spec.replicas must be between 1 and {MAX_REPLICAS}, got {replicas}"
            )));
        }
        let port = self.port();
        if !(1..=65535).contains(&port) {
            return Err(Error::permanent(format!(
                "spec.port must be between 1 and 65535, got {port}"
            )));
        }
        let timeout = self.upgrade_timeout_seconds();
        if !UPGRADE_TIMEOUT_SECONDS.contains(&timeout) {
            return Err(Error::permanent(format!(
                "spec.upgrade.timeoutSeconds must be between {} and {}, got {timeout}",
                UPGRADE_TIMEOUT_SECONDS.start(),
                UPGRADE_TIMEOUT_SECONDS.end()
            )));
        }
        if let Some(key) = self.config.keys().find(|key| !is_config_map_key(key)) {
            return Err(Error::permanent(format!(
                "spec.config key {key:?} is not a valid file name (letters, digits, '-', '_' and '.', at most 253 characters)"
            )));
        }
        Ok(())
    }
}

/// Kubernetes' rule for ConfigMap keys: `[-._a-zA-Z0-9]+`, at most 253
/// characters, and not `.` or `..`.
fn is_config_map_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The phase a [`Cache`] reports in `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// No Deployment observed yet.
    Pending,
    /// The Deployment exists but is not yet up to date and fully ready.
    Progressing,
    /// Every replica is ready and runs the current spec.
    Ready,
    /// `spec.paused` is true: children are left alone.
    Paused,
    /// The rollout of `spec.image` exceeded its deadline: the Deployment
    /// runs `status.lastGoodImage` again until `spec.image` changes.
    Degraded,
}

impl Phase {
    /// The name written to `status.phase`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Progressing => "Progressing",
            Self::Ready => "Ready",
            Self::Paused => "Paused",
            Self::Degraded => "Degraded",
        }
    }
}

/// The observed state of a [`Cache`]. The host adds `observedGeneration`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheStatus {
    /// Ready pods of the Deployment.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Pending, Progressing, Ready, Paused or Degraded. A string, so an
    /// unknown value written by something else does not make the parent
    /// unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The generation the host last reported for (written by the host; read
    /// here only so it survives a round trip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The last image whose rollout completed with every replica Ready;
    /// the image a failed upgrade is rolled back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_good_image: Option<String>,
    /// The image whose rollout exceeded its deadline and was rolled back;
    /// not tried again while `spec.image` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_image: Option<String>,
    /// `Available` and `Progressing`, `Upgrading` and `Upgraded` (and
    /// `Registered` with a registry), as `metav1.Condition`s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(image: &str) -> CacheSpec {
        CacheSpec {
            image: image.into(),
            ..CacheSpec::default()
        }
    }

    #[test]
    fn defaults_apply_when_replicas_and_port_are_absent() {
        let spec: CacheSpec = serde_json::from_value(json!({"image": "redis:7.2"})).unwrap();
        assert_eq!(spec.replicas(), 1);
        assert_eq!(spec.port(), 6379);
        assert!(spec.config.is_empty());
        assert!(!spec.paused);
    }

    #[test]
    fn a_full_spec_round_trips_in_camel_case() {
        let value = json!({
            "image": "redis:7.2",
            "replicas": 2,
            "port": 6380,
            "config": {"redis.conf": "maxmemory 64mb"},
            "paused": true
        });
        let spec: CacheSpec = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(serde_json::to_value(&spec).unwrap(), value);
    }

    #[test]
    fn an_empty_image_is_a_permanent_error() {
        let err = spec("").validate().unwrap_err();
        assert!(!err.is_retryable());
        assert!(err.message.contains("image"));
        assert!(spec("   ").validate().is_err());
    }

    #[test]
    fn replicas_outside_one_to_ten_are_refused() {
        for bad in [0, -1, 11] {
            let mut s = spec("redis");
            s.replicas = Some(bad);
            assert!(s.validate().is_err(), "replicas {bad}");
        }
        let mut s = spec("redis");
        s.replicas = Some(10);
        assert!(s.validate().is_ok());
    }

    #[test]
    fn ports_outside_the_tcp_range_are_refused() {
        for bad in [0, 65536] {
            let mut s = spec("redis");
            s.port = Some(bad);
            assert!(s.validate().is_err(), "port {bad}");
        }
    }

    #[test]
    fn an_upgrade_timeout_outside_thirty_to_3600_seconds_is_refused() {
        let with = |seconds: i32| CacheSpec {
            upgrade: Some(CacheUpgrade {
                timeout_seconds: Some(seconds),
            }),
            ..spec("redis")
        };
        for bad in [0, 29, 3601] {
            let err = with(bad).validate().unwrap_err();
            assert!(!err.is_retryable());
            assert_eq!(
                err.message,
                format!("spec.upgrade.timeoutSeconds must be between 30 and 3600, got {bad}")
            );
        }
        for good in [30, 3600] {
            assert!(with(good).validate().is_ok(), "{good}");
            assert_eq!(with(good).upgrade_timeout_seconds(), good);
        }
        assert_eq!(spec("redis").upgrade_timeout_seconds(), 300);
        let parsed: CacheSpec =
            serde_json::from_value(json!({"image": "redis", "upgrade": {"timeoutSeconds": 45}}))
                .unwrap();
        assert_eq!(parsed, with(45));
        let empty: CacheSpec =
            serde_json::from_value(json!({"image": "redis", "upgrade": {}})).unwrap();
        assert_eq!(empty.upgrade_timeout_seconds(), 300);
    }

    #[test]
    fn config_keys_must_be_valid_file_names() {
        let mut s = spec("redis");
        s.config.insert("redis.conf".into(), "x".into());
        assert!(s.validate().is_ok());
        for bad in ["a/b", "..", "", "sp ace"] {
            let mut s = spec("redis");
            s.config.insert(bad.into(), "x".into());
            assert!(s.validate().is_err(), "key {bad:?}");
        }
    }

    #[test]
    fn an_empty_image_takes_the_default_image_setting() {
        let settings = CacheSettings {
            default_image: Some("redis:7.4".into()),
            ..CacheSettings::default()
        };
        assert_eq!(spec("").with_defaults(&settings).image, "redis:7.4");
        assert_eq!(spec("valkey:8").with_defaults(&settings).image, "valkey:8");
        assert!(
            spec("")
                .with_defaults(&CacheSettings::default())
                .validate()
                .is_err()
        );
    }

    #[test]
    fn settings_are_checked_and_unknown_fields_refused() {
        let parse = |text: &str| {
            CacheSettings::parse(&wasmop_guest::Settings::from_json(Some(text.into())))
        };
        assert_eq!(
            parse(r#"{"defaultImage":"redis:7.4"}"#)
                .unwrap()
                .default_image
                .as_deref(),
            Some("redis:7.4")
        );
        assert!(
            parse(r#"{"defaultImage":" "}"#)
                .unwrap_err()
                .contains("defaultImage")
        );
        assert!(
            parse(r#"{"defaultImg":"x"}"#)
                .unwrap_err()
                .contains("unknown field")
        );
        assert_eq!(
            parse(r#"{"apiGroup":"g1.example.com"}"#)
                .unwrap()
                .api_group
                .as_deref(),
            Some("g1.example.com")
        );
        for bad in ["nodot", "UPPER.example.com", "a/b.example.com"] {
            let err = parse(&format!(r#"{{"apiGroup":"{bad}"}}"#)).unwrap_err();
            assert!(err.contains("apiGroup"), "{bad}: {err}");
        }
        assert_eq!(
            CacheSettings::parse(&wasmop_guest::Settings::none()),
            Ok(CacheSettings::default())
        );
    }

    #[test]
    fn a_secret_ref_needs_a_name_and_a_valid_key() {
        let with = |name: &str, key: &str| CacheSpec {
            auth: Some(CacheAuth {
                secret_ref: SecretKeyRef {
                    name: name.into(),
                    key: key.into(),
                },
            }),
            ..spec("redis")
        };
        assert!(with("creds", "password").validate().is_ok());
        assert!(with("", "password").validate().is_err());
        assert!(with("creds", "").validate().is_err());
        assert!(with("creds", "a/b").validate().is_err());
        let parsed: CacheSpec = serde_json::from_value(
            json!({"image": "redis", "auth": {"secretRef": {"name": "creds", "key": "password"}}}),
        )
        .unwrap();
        assert_eq!(parsed, with("creds", "password"));
    }

    #[test]
    fn status_reads_what_the_host_wrote() {
        let value = json!({
            "readyReplicas": 2,
            "phase": "Degraded",
            "observedGeneration": 4,
            "lastGoodImage": "redis:7.2",
            "failedImage": "redis:7.4-never-ready"
        });
        let status: CacheStatus = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(status.ready_replicas, 2);
        assert_eq!(status.phase.as_deref(), Some(Phase::Degraded.as_str()));
        assert_eq!(status.observed_generation, Some(4));
        assert_eq!(status.last_good_image.as_deref(), Some("redis:7.2"));
        assert_eq!(
            status.failed_image.as_deref(),
            Some("redis:7.4-never-ready")
        );
        assert_eq!(serde_json::to_value(&status).unwrap(), value);
    }
}
