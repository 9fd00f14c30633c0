//! The desired children of a `Cache`: ConfigMap, Deployment, Service and, in
//! v2, a PodDisruptionBudget.
//!
//! Children carry only names, labels and specs; the host stamps the
//! namespace, the controller ownerReference and the `wasmop.dev/guest` label.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource, PodSpec,
    PodTemplateSpec, SecretKeySelector, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use wasmop_guest::meta;

use crate::api::CacheSpec;
use crate::auth::{PASSWORD_ENV, Password, SECRET_HASH_ANNOTATION};
use crate::flavor::{Flavor, VERSION_LABEL, VERSION_V2};
use crate::observed::Fingerprint;

/// The pod-template annotation holding the hash of `spec.config`; a config
/// change changes it and so rolls the pods.
pub const CONFIG_HASH_ANNOTATION: &str = "apps.example.com/config-hash";
/// Where the config files appear inside the container.
pub const CONFIG_MOUNT_PATH: &str = "/etc/cache";
/// The container's name in the pod template.
pub const CONTAINER_NAME: &str = "cache";
/// The name of the container port and the Service port.
const PORT_NAME: &str = "cache";
/// The name of the config volume in the pod template.
const CONFIG_VOLUME: &str = "config";

/// Every child a Cache should have, in the order they are returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Children {
    /// `<name>-config`, holding `spec.config`.
    pub config_map: ConfigMap,
    /// `<name>`, running `spec.image`, with `spec.upgrade.timeoutSeconds`
    /// as its `progressDeadlineSeconds`.
    pub deployment: Deployment,
    /// `<name>`, exposing `spec.port`.
    pub service: Service,
    /// `<name>`, minAvailable 1; v2 only.
    pub disruption_budget: Option<PodDisruptionBudget>,
    /// [`config_hash`] of `spec.config`, as on the pod template.
    pub config_hash: String,
    /// The hash of the password's value, as on the pod template; `None`
    /// without `spec.auth`.
    pub secret_hash: Option<String>,
}

impl Children {
    /// The children for the Cache `name` with a validated `spec` and its
    /// `password` (never [`Password::Missing`]: then no children change).
    pub fn desired(name: &str, spec: &CacheSpec, password: &Password, flavor: Flavor) -> Self {
        let config_hash = config_hash(&spec.config);
        Self {
            config_map: config_map(name, spec, flavor),
            deployment: deployment(name, spec, &config_hash, password, flavor),
            service: service(name, spec, flavor),
            disruption_budget: flavor.is_v2().then(|| disruption_budget(name, flavor)),
            config_hash,
            secret_hash: match password {
                Password::Found { hash, .. } => Some(hash.clone()),
                Password::None | Password::Missing(_) => None,
            },
        }
    }

    /// What the desired Deployment asks for, to compare with the observed
    /// one.
    pub fn fingerprint<'a>(&'a self, spec: &'a CacheSpec) -> Fingerprint<'a> {
        Fingerprint {
            replicas: Some(spec.replicas().into()),
            image: Some(&spec.image),
            port: Some(spec.port().into()),
            config_hash: Some(&self.config_hash),
            secret_hash: self.secret_hash.as_deref(),
        }
    }
}

/// The name of the ConfigMap of the Cache `name`.
pub fn config_map_name(name: &str) -> String {
    format!("{name}-config")
}

/// The labels that select a Cache's pods: `app: cache`, `cache: <name>`.
/// Selectors never carry the version label, so a v1↔v2 swap keeps them
/// (a Deployment's selector is immutable).
pub fn selector_labels(name: &str) -> BTreeMap<String, String> {
    meta::labels([("app", "cache"), ("cache", name)])
}

/// The labels on each child's metadata: the selector labels, plus
/// `apps.example.com/version: v2` in v2.
pub fn child_labels(name: &str, flavor: Flavor) -> BTreeMap<String, String> {
    let mut labels = selector_labels(name);
    if flavor.is_v2() {
        labels.insert(VERSION_LABEL.to_owned(), VERSION_V2.to_owned());
    }
    labels
}

/// The 64-bit FNV-1a hash of `config` serialized as JSON, as 16 hex digits.
/// A `BTreeMap` serializes with its keys sorted and JSON escapes make the
/// encoding unambiguous, so equal maps always hash the same.
///
/// The hash only tells "the config changed, roll the pods", like the
/// `pod-template-hash` Kubernetes' Deployment controller computes with
/// FNV-1a. Nothing here needs a cryptographic hash: whoever can make two
/// configs collide can edit the config anyway. A wasm guest has no SHA
/// instructions, and SHA-256 in software cost this guest about 1 us per
/// reconcile; FNV-1a costs a few dozen nanoseconds.
pub fn config_hash(config: &BTreeMap<String, String>) -> String {
    use std::hash::Hasher;
    let canonical = serde_json::to_vec(config).unwrap_or_default();
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(&canonical);
    hex::encode(hasher.finish().to_be_bytes())
}

fn config_map(name: &str, spec: &CacheSpec, flavor: Flavor) -> ConfigMap {
    ConfigMap {
        metadata: meta::object_meta(config_map_name(name), child_labels(name, flavor)),
        data: (!spec.config.is_empty()).then(|| spec.config.clone()),
        ..ConfigMap::default()
    }
}

fn deployment(
    name: &str,
    spec: &CacheSpec,
    config_hash: &str,
    password: &Password,
    flavor: Flavor,
) -> Deployment {
    let selector = selector_labels(name);
    let mut annotations =
        BTreeMap::from([(CONFIG_HASH_ANNOTATION.to_owned(), config_hash.to_owned())]);
    let mut env = None;
    if let Password::Found { name, key, hash } = password {
        annotations.insert(SECRET_HASH_ANNOTATION.to_owned(), hash.clone());
        env = Some(vec![EnvVar {
            name: PASSWORD_ENV.to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: name.clone(),
                    key: key.clone(),
                    optional: None,
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        }]);
    }
    Deployment {
        metadata: meta::object_meta(name, child_labels(name, flavor)),
        spec: Some(DeploymentSpec {
            replicas: Some(if flavor.is_broken() {
                0
            } else {
                spec.replicas()
            }),
            // Kubernetes' own verdict on a rollout: after this long without
            // progress the Deployment controller reports
            // `Progressing=False, ProgressDeadlineExceeded`.
            progress_deadline_seconds: Some(spec.upgrade_timeout_seconds()),
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(selector),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: CONTAINER_NAME.to_owned(),
                        image: Some(spec.image.clone()),
                        env,
                        ports: Some(vec![ContainerPort {
                            name: Some(PORT_NAME.to_owned()),
                            container_port: spec.port(),
                            ..ContainerPort::default()
                        }]),
                        volume_mounts: Some(vec![VolumeMount {
                            name: CONFIG_VOLUME.to_owned(),
                            mount_path: CONFIG_MOUNT_PATH.to_owned(),
                            read_only: Some(true),
                            ..VolumeMount::default()
                        }]),
                        ..Container::default()
                    }],
                    volumes: Some(vec![Volume {
                        name: CONFIG_VOLUME.to_owned(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: config_map_name(name),
                            ..ConfigMapVolumeSource::default()
                        }),
                        ..Volume::default()
                    }]),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

fn service(name: &str, spec: &CacheSpec, flavor: Flavor) -> Service {
    Service {
        metadata: meta::object_meta(name, child_labels(name, flavor)),
        spec: Some(ServiceSpec {
            selector: Some(selector_labels(name)),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.to_owned()),
                port: spec.port(),
                target_port: Some(IntOrString::Int(spec.port())),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn disruption_budget(name: &str, flavor: Flavor) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta::object_meta(name, child_labels(name, flavor)),
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(selector_labels(name)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> CacheSpec {
        CacheSpec {
            image: "redis:7.2".into(),
            replicas: Some(2),
            port: Some(6379),
            config: [("redis.conf".to_owned(), "maxmemory 64mb".to_owned())].into(),
            paused: false,
            auth: None,
            upgrade: None,
        }
    }

    #[test]
    fn deployment_runs_the_image_with_the_replicas_and_port() {
        let children = Children::desired("demo", &spec(), &Password::None, Flavor::V1);
        let value = serde_json::to_value(&children.deployment).unwrap();
        assert_eq!(value["apiVersion"], "apps/v1");
        assert_eq!(
            value["metadata"],
            json!({"name": "demo", "labels": {"app": "cache", "cache": "demo"}})
        );
        assert_eq!(value["spec"]["replicas"], 2);
        assert_eq!(value["spec"]["progressDeadlineSeconds"], 300);
        assert_eq!(
            value["spec"]["selector"],
            json!({"matchLabels": {"app": "cache", "cache": "demo"}})
        );
        let pod = &value["spec"]["template"];
        assert_eq!(
            pod["metadata"]["labels"],
            json!({"app": "cache", "cache": "demo"})
        );
        let container = &pod["spec"]["containers"][0];
        assert_eq!(container["image"], "redis:7.2");
        assert_eq!(
            container["ports"],
            json!([{"name": "cache", "containerPort": 6379}])
        );
        assert_eq!(container["volumeMounts"][0]["mountPath"], "/etc/cache");
        assert_eq!(
            pod["spec"]["volumes"][0]["configMap"]["name"],
            "demo-config"
        );
    }

    #[test]
    fn deployment_never_sets_namespace_or_owner() {
        let children = Children::desired("demo", &spec(), &Password::None, Flavor::V2);
        for value in [
            serde_json::to_value(&children.deployment).unwrap(),
            serde_json::to_value(&children.service).unwrap(),
            serde_json::to_value(&children.config_map).unwrap(),
            serde_json::to_value(children.disruption_budget.as_ref().unwrap()).unwrap(),
        ] {
            assert!(value["metadata"].get("namespace").is_none());
            assert!(value["metadata"].get("ownerReferences").is_none());
            assert!(
                value["metadata"]["labels"]
                    .get("wasmop.dev/guest")
                    .is_none()
            );
        }
    }

    #[test]
    fn the_upgrade_timeout_is_the_deployments_progress_deadline() {
        let mut s = spec();
        s.upgrade = Some(crate::api::CacheUpgrade {
            timeout_seconds: Some(45),
        });
        let value = serde_json::to_value(
            Children::desired("demo", &s, &Password::None, Flavor::V1).deployment,
        )
        .unwrap();
        assert_eq!(value["spec"]["progressDeadlineSeconds"], 45);
    }

    #[test]
    fn service_exposes_the_port_and_selects_the_pods() {
        let children = Children::desired("demo", &spec(), &Password::None, Flavor::V1);
        let value = serde_json::to_value(&children.service).unwrap();
        assert_eq!(
            value["spec"],
            json!({
                "selector": {"app": "cache", "cache": "demo"},
                "ports": [{"name": "cache", "port": 6379, "targetPort": 6379}]
            })
        );
    }

    #[test]
    fn config_map_holds_the_config() {
        let children = Children::desired("demo", &spec(), &Password::None, Flavor::V1);
        let value = serde_json::to_value(&children.config_map).unwrap();
        assert_eq!(value["metadata"]["name"], "demo-config");
        assert_eq!(value["data"], json!({"redis.conf": "maxmemory 64mb"}));
    }

    #[test]
    fn an_empty_config_gives_a_config_map_without_data() {
        let mut s = spec();
        s.config.clear();
        let value = serde_json::to_value(
            Children::desired("demo", &s, &Password::None, Flavor::V1).config_map,
        )
        .unwrap();
        assert!(value.get("data").is_none());
    }

    #[test]
    fn the_config_hash_changes_with_the_config_and_only_then() {
        let a = spec();
        let mut b = spec();
        assert_eq!(config_hash(&a.config), config_hash(&b.config));
        b.config.insert("extra".into(), "1".into());
        assert_ne!(config_hash(&a.config), config_hash(&b.config));
        let hash = config_hash(&a.config);
        assert_eq!(hash.len(), 16);
        assert!(hash.bytes().all(|c| c.is_ascii_hexdigit()));
        let deployment = Children::desired("demo", &a, &Password::None, Flavor::V1).deployment;
        let annotations = deployment
            .spec
            .unwrap()
            .template
            .metadata
            .unwrap()
            .annotations
            .unwrap();
        assert_eq!(annotations[CONFIG_HASH_ANNOTATION], hash);
    }

    #[test]
    fn a_found_password_is_an_env_var_from_the_secret_and_its_hash_an_annotation() {
        let password = Password::Found {
            name: "creds".into(),
            key: "password".into(),
            hash: "0123456789abcdef".into(),
        };
        let deployment = serde_json::to_value(
            Children::desired("demo", &spec(), &password, Flavor::V1).deployment,
        )
        .unwrap();
        let template = &deployment["spec"]["template"];
        assert_eq!(
            template["metadata"]["annotations"][SECRET_HASH_ANNOTATION],
            "0123456789abcdef"
        );
        assert_eq!(
            template["spec"]["containers"][0]["env"],
            json!([{"name": "CACHE_PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}])
        );
        let without = serde_json::to_value(
            Children::desired("demo", &spec(), &Password::None, Flavor::V1).deployment,
        )
        .unwrap();
        let template = &without["spec"]["template"];
        assert!(template["spec"]["containers"][0].get("env").is_none());
        assert!(
            template["metadata"]["annotations"]
                .get(SECRET_HASH_ANNOTATION)
                .is_none()
        );
    }

    #[test]
    fn the_config_hash_is_fnv1a_64_of_the_json_and_never_changes() {
        // A different value for the same config would roll every Cache's
        // pods on upgrade: pin the algorithm's output.
        assert_eq!(config_hash(&BTreeMap::new()), "08f44b07b5901a25");
        let config: BTreeMap<String, String> = [("maxmemory".into(), "256mb".into())].into();
        assert_eq!(config_hash(&config), "9bfc358df2e7da64");
    }

    #[test]
    fn the_config_hash_is_unambiguous_about_key_value_boundaries() {
        let one: BTreeMap<String, String> = [("ab".to_owned(), "c".to_owned())].into();
        let two: BTreeMap<String, String> = [("a".to_owned(), "bc".to_owned())].into();
        assert_ne!(config_hash(&one), config_hash(&two));
    }

    #[test]
    fn v1_has_no_version_label_and_no_disruption_budget() {
        let children = Children::desired("demo", &spec(), &Password::None, Flavor::V1);
        assert!(children.disruption_budget.is_none());
        let labels = children.deployment.metadata.labels.unwrap();
        assert!(!labels.contains_key(VERSION_LABEL));
    }

    #[test]
    fn v2_labels_every_child_but_not_the_selectors() {
        let children = Children::desired("demo", &spec(), &Password::None, Flavor::V2);
        let pdb = children.disruption_budget.clone().unwrap();
        for labels in [
            children.config_map.metadata.labels.clone(),
            children.deployment.metadata.labels.clone(),
            children.service.metadata.labels.clone(),
            pdb.metadata.labels.clone(),
        ] {
            assert_eq!(labels.unwrap()[VERSION_LABEL], "v2");
        }
        let spec = children.deployment.spec.unwrap();
        assert!(
            !spec
                .selector
                .match_labels
                .unwrap()
                .contains_key(VERSION_LABEL)
        );
        assert!(
            !spec
                .template
                .metadata
                .unwrap()
                .labels
                .unwrap()
                .contains_key(VERSION_LABEL)
        );
        assert!(
            !children
                .service
                .spec
                .unwrap()
                .selector
                .unwrap()
                .contains_key(VERSION_LABEL)
        );
    }

    #[test]
    fn v2_adds_a_disruption_budget_keeping_one_pod() {
        let pdb = Children::desired("demo", &spec(), &Password::None, Flavor::V2)
            .disruption_budget
            .unwrap();
        let value = serde_json::to_value(&pdb).unwrap();
        assert_eq!(value["apiVersion"], "policy/v1");
        assert_eq!(value["kind"], "PodDisruptionBudget");
        assert_eq!(value["metadata"]["name"], "demo");
        assert_eq!(
            value["spec"],
            json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "cache", "cache": "demo"}}})
        );
    }
}
