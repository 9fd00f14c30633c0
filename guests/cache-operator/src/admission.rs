//! Defaulting and validation of a Cache, served by the host as admission
//! webhooks.
//!
//! Defaults: `spec.image` from the setting `defaultImage` when empty, and
//! the Redis directive `maxmemory-policy` (`allkeys-lru`) when `config`
//! sets neither it nor a whole file (`*.conf`). Validation, beyond what the
//! CRD's schema and CEL say: the image must name a tag other than `latest`
//! (or a digest), and every `config` key must be a Redis directive this
//! guest knows or a file name ending in `.conf`. The v2 build, which keeps a
//! PodDisruptionBudget of `minAvailable: 1` per Cache, also refuses fewer
//! than two replicas: one pod under that budget could never be evicted, so
//! no node it runs on could be drained.

use serde_json::{Value, json};
use wasmop_guest::admission::{AdmissionResponse, Operation, Patch, Review, pointer_segment};

use crate::api::CacheSettings;
use crate::conversion::{V1ALPHA1, convert};
use crate::flavor::Flavor;

/// The eviction policy a Cache gets when its config names none.
pub const DEFAULT_MAXMEMORY_POLICY: &str = "allkeys-lru";

/// Redis configuration directives a `config` key may name (redis.conf of
/// Redis 7).
pub const REDIS_DIRECTIVES: &[&str] = &[
    "activedefrag",
    "active-defrag-cycle-max",
    "active-defrag-cycle-min",
    "active-defrag-ignore-bytes",
    "active-defrag-threshold-lower",
    "active-defrag-threshold-upper",
    "appendfilename",
    "appendfsync",
    "appendonly",
    "auto-aof-rewrite-min-size",
    "auto-aof-rewrite-percentage",
    "databases",
    "dir",
    "dbfilename",
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "hz",
    "io-threads",
    "latency-monitor-threshold",
    "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "list-max-listpack-size",
    "loglevel",
    "lua-time-limit",
    "maxclients",
    "maxmemory",
    "maxmemory-policy",
    "maxmemory-samples",
    "min-replicas-max-lag",
    "min-replicas-to-write",
    "notify-keyspace-events",
    "protected-mode",
    "repl-backlog-size",
    "save",
    "set-max-intset-entries",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "stop-writes-on-bgsave-error",
    "tcp-backlog",
    "tcp-keepalive",
    "timeout",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
];

/// The verdict of this build ([`Flavor::CURRENT`]) on one request for a
/// Cache in either version.
pub fn admit(review: &Review) -> AdmissionResponse {
    admit_as(review, Flavor::CURRENT)
}

/// The verdict of `flavor`.
pub fn admit_as(review: &Review, flavor: Flavor) -> AdmissionResponse {
    if !matches!(review.operation(), Operation::Create | Operation::Update) {
        return AdmissionResponse::allow();
    }
    let object: Value = match review.object_as() {
        Ok(Some(object)) => object,
        Ok(None) => return AdmissionResponse::allow(),
        Err(e) => return AdmissionResponse::deny(format!("the Cache does not decode: {e}")),
    };
    let settings = match CacheSettings::parse(&review.settings()) {
        Ok(settings) => settings,
        Err(e) => return AdmissionResponse::deny(e),
    };
    let version = object["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map(|(group, version)| (group.to_owned(), version.to_owned()));
    let Some((group, version)) = version else {
        return AdmissionResponse::deny("the Cache has no apiVersion");
    };
    // Read every version in the v1alpha1 shape; patch in the object's own.
    let alpha = match convert(object.clone(), &format!("{group}/{V1ALPHA1}")) {
        Ok(alpha) => alpha,
        Err(e) => return AdmissionResponse::deny(e),
    };
    let spec = &alpha["spec"];
    let mut patch = Patch::new();
    let mut image = spec["image"].as_str().unwrap_or_default().to_owned();
    if image.trim().is_empty()
        && let Some(default) = &settings.default_image
    {
        image.clone_from(default);
        patch = patch.add("/spec/image", json!(default));
    }
    let config = spec["config"].as_object();
    let keys: Vec<&str> = config
        .map(|c| c.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if !keys
        .iter()
        .any(|k| *k == "maxmemory-policy" || k.ends_with(".conf"))
    {
        patch = match (config.is_some(), version.as_str()) {
            (false, V1ALPHA1) => patch.add(
                "/spec/config",
                json!({ "maxmemory-policy": DEFAULT_MAXMEMORY_POLICY }),
            ),
            (true, V1ALPHA1) => patch.add(
                &format!("/spec/config/{}", pointer_segment("maxmemory-policy")),
                json!(DEFAULT_MAXMEMORY_POLICY),
            ),
            (false, _) => patch.add(
                "/spec/config",
                json!([{"name": "maxmemory-policy", "value": DEFAULT_MAXMEMORY_POLICY}]),
            ),
            (true, _) => patch.add(
                "/spec/config/-",
                json!({"name": "maxmemory-policy", "value": DEFAULT_MAXMEMORY_POLICY}),
            ),
        };
    }
    if object.get("spec").is_none_or(|s| !s.is_object()) {
        return AdmissionResponse::deny("the Cache has no spec");
    }
    if let Err(message) = check_image(&image) {
        return AdmissionResponse::deny(message);
    }
    if let Some(key) = keys
        .iter()
        .find(|k| !k.ends_with(".conf") && !REDIS_DIRECTIVES.contains(k))
    {
        return AdmissionResponse::deny(format!(
            "spec.config key {key:?} is not a Redis directive this operator knows (nor a *.conf file)"
        ));
    }
    let replicas = spec["replicas"]
        .as_i64()
        .unwrap_or(i64::from(crate::api::DEFAULT_REPLICAS));
    if flavor.is_v2() && replicas < 2 {
        return AdmissionResponse::deny(format!(
            "spec.replicas {replicas}: this operator keeps a PodDisruptionBudget of minAvailable 1, so a single pod could never be evicted; ask for 2 or more"
        ));
    }
    if review.mutating() {
        patch.allow()
    } else {
        AdmissionResponse::allow()
    }
}

/// An image must name a tag other than `latest`, or a digest.
fn check_image(image: &str) -> Result<(), String> {
    if image.trim().is_empty() {
        return Err("spec.image must not be empty (this guest has no setting defaultImage)".into());
    }
    if image.contains('@') {
        return Ok(());
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        None => Err(format!(
            "spec.image {image:?} has no tag: name one (such as redis:7.2), not latest"
        )),
        Some((_, "latest")) => Err(format!(
            "spec.image {image:?} uses the tag latest: name a fixed version"
        )),
        Some((_, "")) => Err(format!("spec.image {image:?} has an empty tag")),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(spec: Value, mutating: bool) -> Review {
        let object = json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": "c"}, "spec": spec});
        Review::new(Operation::Create, Some(&object), mutating)
    }

    fn patched(response: &AdmissionResponse) -> Value {
        serde_json::from_str(response.patch.as_deref().unwrap_or("[]")).unwrap()
    }

    #[test]
    fn images_without_a_fixed_tag_are_denied_with_the_reason() {
        for (image, says) in [
            ("redis", "has no tag"),
            ("redis:latest", "latest"),
            ("localhost:5000/redis", "has no tag"),
            ("redis:", "empty tag"),
        ] {
            let response = admit(&review(json!({"image": image}), false));
            assert!(!response.allowed, "{image}");
            assert!(
                response.message.contains(says),
                "{image}: {}",
                response.message
            );
        }
        for image in ["redis:7.2", "localhost:5000/redis:7", "redis@sha256:abc"] {
            assert!(
                admit(&review(json!({"image": image}), false)).allowed,
                "{image}"
            );
        }
    }

    #[test]
    fn unknown_config_keys_are_denied_naming_the_key() {
        let response = admit(&review(
            json!({"image": "redis:7.2", "config": {"maxmemory": "1mb", "bogus-key": "1"}}),
            false,
        ));
        assert!(!response.allowed);
        assert!(
            response.message.contains("\"bogus-key\""),
            "{}",
            response.message
        );
        let files = json!({"image": "redis:7.2", "config": {"redis.conf": "x"}});
        assert!(admit(&review(files, false)).allowed);
    }

    #[test]
    fn defaulting_adds_the_eviction_policy_once_in_either_shape() {
        let response = admit(&review(json!({"image": "redis:7.2"}), true));
        assert!(response.allowed);
        assert_eq!(
            patched(&response),
            json!([{"op": "add", "path": "/spec/config", "value": {"maxmemory-policy": "allkeys-lru"}}])
        );
        let response = admit(&review(
            json!({"image": "redis:7.2", "config": {"maxmemory": "1mb"}}),
            true,
        ));
        assert_eq!(
            patched(&response)[0]["path"],
            "/spec/config/maxmemory-policy"
        );
        let set = json!({"image": "redis:7.2", "config": {"maxmemory-policy": "noeviction"}});
        assert_eq!(admit(&review(set, true)).patch, None);
        // The validating call never patches.
        assert_eq!(
            admit(&review(json!({"image": "redis:7.2"}), false)).patch,
            None
        );
        let beta = json!({"apiVersion": "apps.example.com/v1beta1", "kind": "Cache",
            "metadata": {"name": "c"}, "spec": {"image": "redis:7.2", "config": [{"name": "maxmemory", "value": "1mb"}]}});
        let response = admit(&Review::new(Operation::Create, Some(&beta), true));
        assert_eq!(patched(&response)[0]["path"], "/spec/config/-");
    }

    #[test]
    fn v2_refuses_a_single_replica_that_its_budget_would_pin() {
        let one = review(json!({"image": "redis:7.2"}), false);
        assert!(admit_as(&one, Flavor::V1).allowed);
        let denied = admit_as(&one, Flavor::V2);
        assert!(!denied.allowed && denied.message.contains("PodDisruptionBudget"));
        let two = review(json!({"image": "redis:7.2", "replicas": 2}), false);
        assert!(admit_as(&two, Flavor::V2).allowed);
    }

    #[test]
    fn the_default_image_comes_from_the_settings() {
        let object = json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": "c"}, "spec": {"config": {"maxmemory-policy": "noeviction"}}});
        let mut wire = Review::new(Operation::Create, Some(&object), true)
            .wire()
            .clone();
        wire.settings = Some(r#"{"defaultImage": "redis:7.4"}"#.into());
        let response = admit(&Review::from_wire(wire));
        assert!(response.allowed, "{}", response.message);
        assert_eq!(
            patched(&response),
            json!([{"op": "add", "path": "/spec/image", "value": "redis:7.4"}])
        );
        assert!(!admit(&review(json!({}), true)).allowed);
    }
}
