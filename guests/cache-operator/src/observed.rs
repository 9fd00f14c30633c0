//! What the operator reads from the observed Deployment.
//!
//! Only a handful of fields matter (replicas, image, port, config hash, the
//! rollout counters and the `Progressing` condition), so the Deployment's text is decoded into this
//! small view and every other field is skipped: decoding a whole k8s-openapi
//! `Deployment` (or a `serde_json::Value`) made the component larger and
//! each reconcile several times slower, for nothing.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::auth::SECRET_HASH_ANNOTATION;
use crate::children::{CONFIG_HASH_ANNOTATION, CONTAINER_NAME};

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
    /// The pod template's secret-hash annotation.
    pub secret_hash: Option<&'a str>,
}

/// An observed Deployment, as far as the operator reads it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ObservedDeployment {
    metadata: Metadata,
    spec: Spec,
    status: Option<Status>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Metadata {
    generation: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Spec {
    replicas: Option<i64>,
    template: Template,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Template {
    metadata: TemplateMetadata,
    spec: PodSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct TemplateMetadata {
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct PodSpec {
    containers: Vec<Container>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Container {
    name: String,
    image: Option<String>,
    ports: Vec<Port>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Port {
    container_port: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Status {
    observed_generation: Option<i64>,
    replicas: Option<i64>,
    updated_replicas: Option<i64>,
    ready_replicas: Option<i64>,
    conditions: Vec<DeploymentCondition>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct DeploymentCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: String,
}

/// The reason Kubernetes' Deployment controller gives `Progressing=False`
/// once a rollout made no progress for `progressDeadlineSeconds`.
pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

impl ObservedDeployment {
    /// What its spec asks for.
    pub fn fingerprint(&self) -> Fingerprint<'_> {
        let container = self
            .spec
            .template
            .spec
            .containers
            .iter()
            .find(|c| c.name == CONTAINER_NAME);
        let annotation = |key: &str| {
            self.spec
                .template
                .metadata
                .annotations
                .get(key)
                .map(String::as_str)
        };
        Fingerprint {
            replicas: self.spec.replicas,
            image: container.and_then(|c| c.image.as_deref()),
            port: container
                .and_then(|c| c.ports.first())
                .and_then(|p| p.container_port),
            config_hash: annotation(CONFIG_HASH_ANNOTATION),
            secret_hash: annotation(SECRET_HASH_ANNOTATION),
        }
    }

    /// `status.replicas`: the pods that exist, 0 when absent.
    pub fn pods(&self) -> i64 {
        self.status.as_ref().and_then(|s| s.replicas).unwrap_or(0)
    }

    /// `status.readyReplicas`, 0 when absent.
    pub fn ready_replicas(&self) -> i32 {
        self.status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(0)
    }

    /// True when its controller has seen the latest generation and says the
    /// rollout failed: `Progressing=False`, reason
    /// [`PROGRESS_DEADLINE_EXCEEDED`]. The verdict is about the spec the
    /// Deployment has now; before its controller saw that spec, the
    /// condition may still be about an earlier one, so it does not count.
    pub fn progress_deadline_exceeded(&self) -> bool {
        self.status.as_ref().is_some_and(|status| {
            self.seen_latest(status)
                && status.conditions.iter().any(|c| {
                    c.type_ == "Progressing"
                        && c.status == "False"
                        && c.reason == PROGRESS_DEADLINE_EXCEEDED
                })
        })
    }

    /// Whether the Deployment controller has seen its latest generation.
    fn seen_latest(&self, status: &Status) -> bool {
        match (status.observed_generation, self.metadata.generation) {
            (Some(seen), Some(generation)) => seen >= generation,
            (_, None) => true,
            (None, Some(_)) => false,
        }
    }

    /// True when the Deployment runs `desired` everywhere: its spec matches,
    /// its controller has seen the latest generation, and exactly the
    /// desired number of pods exist, all updated and ready.
    pub fn rollout_complete(&self, desired: &Fingerprint<'_>) -> bool {
        let Some(replicas) = desired.replicas else {
            return false;
        };
        let Some(status) = &self.status else {
            return false;
        };
        self.fingerprint() == *desired
            && self.seen_latest(status)
            && status.replicas.unwrap_or(0) == replicas
            && status.updated_replicas.unwrap_or(0) == replicas
            && status.ready_replicas.unwrap_or(0) == replicas
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn view(object: &Value) -> ObservedDeployment {
        serde_json::from_value(object.clone()).unwrap()
    }

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
            secret_hash: None,
        }
    }

    #[test]
    fn the_fingerprint_reads_the_cache_container() {
        let object = deployment();
        assert_eq!(view(&object).fingerprint(), desired());
    }

    #[test]
    fn a_matching_fully_ready_deployment_has_completed_its_rollout() {
        let object = deployment();
        assert!(view(&object).rollout_complete(&desired()));
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
            assert!(!view(&object).rollout_complete(&desired()), "{pointer}");
        }
    }

    #[test]
    fn an_old_spec_means_the_rollout_is_not_complete() {
        let object = deployment();
        let mut newer = desired();
        newer.image = Some("redis:7.4");
        assert!(!view(&object).rollout_complete(&newer));
    }

    #[test]
    fn the_deadline_counts_only_once_the_controller_saw_the_latest_spec() {
        let mut object = deployment();
        object["status"]["conditions"] = json!([
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
        ]);
        assert!(view(&object).progress_deadline_exceeded());
        object["metadata"]["generation"] = json!(4);
        assert!(!view(&object).progress_deadline_exceeded());
        object["status"]["observedGeneration"] = json!(4);
        object["status"]["conditions"][1]["status"] = json!("True");
        object["status"]["conditions"][1]["reason"] = json!("ReplicaSetUpdated");
        assert!(!view(&object).progress_deadline_exceeded());
        assert!(!view(&deployment()).progress_deadline_exceeded());
    }

    #[test]
    fn missing_fields_read_as_absent() {
        let object = json!({"metadata": {"name": "demo"}});
        let observed = view(&object);
        assert_eq!(observed.ready_replicas(), 0);
        assert_eq!(
            observed.fingerprint(),
            Fingerprint {
                replicas: None,
                image: None,
                port: None,
                config_hash: None,
                secret_hash: None
            }
        );
        assert!(!observed.rollout_complete(&desired()));
        assert!(!observed.progress_deadline_exceeded());
    }
}
