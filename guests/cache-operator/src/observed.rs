//! What the operator reads from the observed Deployment.
//!
//! Only a handful of fields matter (replicas, image, port, config hash and
//! the rollout counters), so they are read straight from the JSON instead of
//! decoding a whole k8s-openapi `Deployment`: decoding every pod-spec field
//! made the component ~200 KB larger and each reconcile slower, for nothing.

use serde_json::Value;

use crate::children::CONTAINER_NAME;

/// The parts of a Deployment's spec the operator sets and a rollout must
/// reach: replicas, image, port and config hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint<'a> {
    /// `spec.replicas`.
    pub replicas: Option<i64>,
    /// The image of the `cache` container.
    pub image: Option<&'a str>,
    /// The first container port of the `cache` container.
    pub port: Option<i64>,
    /// The pod template's config-hash annotation.
    pub config_hash: Option<&'a str>,
}

/// An observed Deployment, as the host sent it.
#[derive(Debug, Clone, Copy)]
pub struct ObservedDeployment<'a> {
    object: &'a Value,
}

impl<'a> ObservedDeployment<'a> {
    /// A view of `object`, an apps/v1 Deployment.
    pub fn new(object: &'a Value) -> Self {
        Self { object }
    }

    fn int(&self, pointer: &str) -> Option<i64> {
        self.object.pointer(pointer).and_then(Value::as_i64)
    }

    /// What its spec asks for.
    pub fn fingerprint(&self) -> Fingerprint<'a> {
        let container = self
            .object
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .and_then(|containers| {
                containers
                    .iter()
                    .find(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER_NAME))
            });
        Fingerprint {
            replicas: self.int("/spec/replicas"),
            image: container
                .and_then(|c| c.get("image"))
                .and_then(Value::as_str),
            port: container
                .and_then(|c| c.pointer("/ports/0/containerPort"))
                .and_then(Value::as_i64),
            config_hash: self
                .object
                .pointer("/spec/template/metadata/annotations")
                .and_then(|a| a.get(crate::children::CONFIG_HASH_ANNOTATION))
                .and_then(Value::as_str),
        }
    }

    /// `status.readyReplicas`, 0 when absent.
    pub fn ready_replicas(&self) -> i32 {
        self.int("/status/readyReplicas")
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(0)
    }

    /// True when the Deployment runs `desired` everywhere: its spec matches,
    /// its controller has seen the latest generation, and exactly the
    /// desired number of pods exist, all updated and ready.
    pub fn rollout_complete(&self, desired: &Fingerprint<'_>) -> bool {
        let Some(replicas) = desired.replicas else {
            return false;
        };
        if self.object.get("status").is_none_or(Value::is_null) {
            return false;
        }
        let seen_latest = match (
            self.int("/status/observedGeneration"),
            self.int("/metadata/generation"),
        ) {
            (Some(seen), Some(generation)) => seen >= generation,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        self.fingerprint() == *desired
            && seen_latest
            && self.int("/status/replicas").unwrap_or(0) == replicas
            && self.int("/status/updatedReplicas").unwrap_or(0) == replicas
            && self.int("/status/readyReplicas").unwrap_or(0) == replicas
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "demo", "generation": 3},
            "spec": {
                "replicas": 2,
                "template": {
                    "metadata": {"annotations": {"apps.example.com/config-hash": "abc"}},
                    "spec": {"containers": [
                        {"name": "sidecar", "image": "busybox"},
                        {"name": "cache", "image": "redis:7.2", "ports": [{"containerPort": 6379}]}
                    ]}
                }
            },
            "status": {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2}
        })
    }

    fn desired() -> Fingerprint<'static> {
        Fingerprint {
            replicas: Some(2),
            image: Some("redis:7.2"),
            port: Some(6379),
            config_hash: Some("abc"),
        }
    }

    #[test]
    fn the_fingerprint_reads_the_cache_container() {
        let object = deployment();
        assert_eq!(ObservedDeployment::new(&object).fingerprint(), desired());
    }

    #[test]
    fn a_matching_fully_ready_deployment_has_completed_its_rollout() {
        let object = deployment();
        assert!(ObservedDeployment::new(&object).rollout_complete(&desired()));
    }

    #[test]
    fn any_lagging_counter_means_the_rollout_is_not_complete() {
        for (pointer, value) in [
            ("/status/readyReplicas", json!(1)),
            ("/status/updatedReplicas", json!(1)),
            ("/status/replicas", json!(3)),
            ("/status/observedGeneration", json!(2)),
            ("/status", Value::Null),
        ] {
            let mut object = deployment();
            *object.pointer_mut(pointer).unwrap() = value;
            assert!(
                !ObservedDeployment::new(&object).rollout_complete(&desired()),
                "{pointer}"
            );
        }
    }

    #[test]
    fn an_old_spec_means_the_rollout_is_not_complete() {
        let object = deployment();
        let mut newer = desired();
        newer.image = Some("redis:7.4");
        assert!(!ObservedDeployment::new(&object).rollout_complete(&newer));
    }

    #[test]
    fn missing_fields_read_as_absent() {
        let object = json!({"metadata": {"name": "demo"}});
        let observed = ObservedDeployment::new(&object);
        assert_eq!(observed.ready_replicas(), 0);
        assert_eq!(
            observed.fingerprint(),
            Fingerprint {
                replicas: None,
                image: None,
                port: None,
                config_hash: None
            }
        );
        assert!(!observed.rollout_complete(&desired()));
    }
}
