//! The seeds' kubebuilder Cache controller (chapter 3, sections 3.3 and
//! 3.4) as a wasmop guest: the logic of `tests/peers/kubebuilder-cache`,
//! so that `WASMOP_SCALE_GUEST=tutorial-cache cargo xtask bench scale`
//! measures the host against controller-runtime with the same work asked
//! of the control plane.
//!
//! For each `Cache` (`apps.example.com/v1alpha1`, or the group of the
//! setting `apiGroup`) it wants a Deployment `<name>` running `spec.image`
//! with `spec.replicas` pods (default 1) labelled `app: cache`,
//! `cache: <name>`, and a Service `<name>` on `spec.port` (default 6379).
//! Its status has `readyReplicas` (the Deployment's), `phase` (`Ready` when
//! every replica is ready, else `Progressing`) and the condition
//! `Available` (status True, reason the phase, message `ready replicas:
//! <n>`, at the Cache's generation), as the tutorial writes them. Unlike
//! the tutorial, the condition keeps its `lastTransitionTime` while its
//! status stays the same, so a converged Cache gets the status it already
//! has and the host writes nothing. No ConfigMap, finalizer or Events: the
//! seeds' stages 3 to 5 are the cache-operator's.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, PodTemplateSpec, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use wasmop_guest::condition::{ConditionStatus, set_condition};
use wasmop_guest::{
    ChildKind, Description, Error, KindRef, Operator, Request, Response, Result, Settings, meta,
};

/// The Cache kind's group without the setting `apiGroup`.
pub const GROUP: &str = "apps.example.com";
/// The Cache version this guest reads.
pub const VERSION: &str = "v1alpha1";
/// The port of a Cache without `spec.port` (the CRD's default).
pub const DEFAULT_PORT: i32 = 6379;

/// The tutorial's Cache controller.
#[derive(Debug, Clone, Copy, Default)]
pub struct TutorialCache;

/// The settings: only the Cache kind's group, so that one module serves
/// several CRD groups (the bench's density runs).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TutorialSettings {
    #[serde(default)]
    api_group: Option<String>,
}

/// The part of a Cache this controller reads.
#[derive(Debug, Default, Deserialize)]
struct Cache {
    #[serde(default)]
    spec: CacheSpec,
    #[serde(default)]
    status: Option<CacheStatus>,
}

#[derive(Debug, Default, Deserialize)]
struct CacheSpec {
    #[serde(default)]
    image: String,
    #[serde(default)]
    replicas: Option<i32>,
    #[serde(default)]
    port: Option<i32>,
}

/// The status the tutorial writes (the field names of its `CacheStatus`),
/// with the top-level `observedGeneration` the Cache CRD has.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct CacheStatus {
    #[serde(default)]
    ready_replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    observed_generation: Option<i64>,
}

/// The part of an observed Deployment this controller reads.
#[derive(Debug, Default, Deserialize)]
struct ObservedDeployment {
    #[serde(default)]
    status: Option<ObservedDeploymentStatus>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObservedDeploymentStatus {
    #[serde(default)]
    ready_replicas: Option<i32>,
}

impl Operator for TutorialCache {
    fn describe(settings: &Settings) -> std::result::Result<Description, String> {
        let settings: TutorialSettings = settings.get()?;
        let group = settings.api_group.as_deref().unwrap_or(GROUP);
        if !group.contains('.') {
            return Err(format!(
                "settings.apiGroup {group:?} is not an API group (a DNS name with a dot)"
            ));
        }
        Ok(Description::new(KindRef::new(group, VERSION, "Cache"))
            .child(ChildKind::of::<Deployment>())
            .child(ChildKind::of::<Service>()))
    }

    fn reconcile(request: Request) -> Result<Response> {
        let name = request.parent_name().to_owned();
        if name.is_empty() {
            return Err(Error::permanent("the Cache has no metadata.name"));
        }
        if request.deleting {
            // No finalizer: the children go with their owner.
            return Ok(Response::new());
        }
        let cache: Cache = request.parent_as()?;
        let replicas = cache.spec.replicas.unwrap_or(1);
        let ready = request
            .observed_named_as::<Deployment, ObservedDeployment>(&name)
            .and_then(|d| d.status?.ready_replicas)
            .unwrap_or(0);
        let phase = if ready == replicas {
            "Ready"
        } else {
            "Progressing"
        };
        let generation = request.parent_generation();
        let mut status = cache.status.unwrap_or_default();
        status.ready_replicas = ready;
        status.phase = Some(phase.to_owned());
        status.observed_generation = generation;
        set_condition(
            &mut status.conditions,
            "Available",
            ConditionStatus::True,
            phase,
            &format!("ready replicas: {ready}"),
            generation,
            request.now(),
        );
        let mut response = Response::new();
        response.push_child(&deployment(&name, &cache.spec, replicas))?;
        response.push_child(&service(&name, &cache.spec))?;
        response.status(&status)
    }
}

fn labels(name: &str) -> std::collections::BTreeMap<String, String> {
    meta::labels([("app", "cache"), ("cache", name)])
}

fn deployment(name: &str, spec: &CacheSpec, replicas: i32) -> Deployment {
    Deployment {
        metadata: meta::object_meta(name, Default::default()),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(name)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(name)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "cache".to_owned(),
                        image: Some(spec.image.clone()),
                        ports: Some(vec![ContainerPort {
                            container_port: spec.port.unwrap_or(DEFAULT_PORT),
                            name: Some("tcp".to_owned()),
                            ..ContainerPort::default()
                        }]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

fn service(name: &str, spec: &CacheSpec) -> Service {
    let port = spec.port.unwrap_or(DEFAULT_PORT);
    Service {
        metadata: meta::object_meta(name, Default::default()),
        spec: Some(ServiceSpec {
            selector: Some(labels(name)),
            ports: Some(vec![ServicePort {
                name: Some("tcp".to_owned()),
                port,
                target_port: Some(IntOrString::Int(port)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

wasmop_guest::export_operator!(TutorialCache);

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn cache(status: Value) -> Value {
        json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": "c", "generation": 2},
            "spec": {"image": "redis:7.2", "replicas": 2}, "status": status})
    }

    fn deployment_ready(n: i32) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "c"},
            "status": {"readyReplicas": n}})
    }

    fn reconcile(parent: Value, observed: Vec<Value>, at: u64) -> Response {
        let request =
            Request::new(parent, observed, false).at(wasmop_guest::time::from_unix_seconds(at));
        TutorialCache::reconcile(request).unwrap()
    }

    #[test]
    fn wants_the_tutorials_deployment_and_service() {
        let response = reconcile(cache(Value::Null), vec![], 0);
        let children = response.child_values();
        assert_eq!(children.len(), 2);
        let deployment = &children[0];
        assert_eq!(deployment["kind"], "Deployment");
        assert_eq!(deployment["metadata"]["name"], "c");
        assert_eq!(deployment["spec"]["replicas"], 2);
        assert_eq!(
            deployment["spec"]["selector"]["matchLabels"],
            json!({"app": "cache", "cache": "c"})
        );
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "redis:7.2");
        assert_eq!(container["ports"][0]["containerPort"], DEFAULT_PORT);
        let service = &children[1];
        assert_eq!(service["kind"], "Service");
        assert_eq!(service["spec"]["ports"][0]["targetPort"], DEFAULT_PORT);
        assert_eq!(
            service["spec"]["selector"],
            json!({"app": "cache", "cache": "c"})
        );
    }

    #[test]
    fn status_is_ready_when_every_replica_is() {
        let progressing = reconcile(cache(Value::Null), vec![deployment_ready(1)], 0)
            .status_value()
            .unwrap();
        assert_eq!(progressing["phase"], "Progressing");
        assert_eq!(progressing["readyReplicas"], 1);
        assert_eq!(progressing["observedGeneration"], 2);
        let condition = &progressing["conditions"][0];
        assert_eq!(condition["type"], "Available");
        assert_eq!(condition["status"], "True");
        assert_eq!(condition["reason"], "Progressing");
        assert_eq!(condition["message"], "ready replicas: 1");
        assert_eq!(condition["observedGeneration"], 2);
        let ready = reconcile(cache(progressing), vec![deployment_ready(2)], 60)
            .status_value()
            .unwrap();
        assert_eq!(ready["phase"], "Ready");
        assert_eq!(ready["conditions"][0]["reason"], "Ready");
    }

    #[test]
    fn a_converged_cache_gets_the_status_it_has() {
        let first = reconcile(cache(Value::Null), vec![deployment_ready(2)], 0)
            .status_value()
            .unwrap();
        let again = reconcile(cache(first.clone()), vec![deployment_ready(2)], 3600)
            .status_value()
            .unwrap();
        assert_eq!(again, first);
    }

    #[test]
    fn deletion_wants_nothing_and_settings_pick_the_group() {
        let request = Request::new(cache(Value::Null), vec![], true);
        let response = TutorialCache::reconcile(request).unwrap();
        assert!(response.child_values().is_empty());
        assert!(response.status_value().is_none());
        let group = Settings::from_value(&json!({"apiGroup": "g1.example.com"}));
        assert_eq!(
            TutorialCache::describe(&group).unwrap().primary,
            KindRef::new("g1.example.com", VERSION, "Cache")
        );
        let bad = Settings::from_value(&json!({"apiGroup": "nodot"}));
        assert!(
            TutorialCache::describe(&bad)
                .unwrap_err()
                .contains("apiGroup")
        );
        let unknown = Settings::from_value(&json!({"image": "x"}));
        assert!(TutorialCache::describe(&unknown).is_err());
    }
}
