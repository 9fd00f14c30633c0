//! The seeds' `Cache` operator as a wasmop guest.
//!
//! A `Cache` (`apps.example.com/v1alpha1`, plural `caches`, short name `cc`)
//! asks for a cache server: `image`, `replicas` (1–10, default 1), `port`
//! (default 6379), `config` (files mounted at `/etc/cache`), `paused` and
//! `upgrade.timeoutSeconds` (30–3600, default 300).
//! For each Cache the operator wants:
//!
//! - a ConfigMap `<name>-config` holding `spec.config`;
//! - a Deployment `<name>` running `spec.image` with `spec.replicas` pods,
//!   labelled `app: cache`, `cache: <name>`, the config mounted and its hash
//!   in the pod-template annotation [`CONFIG_HASH_ANNOTATION`] so a config
//!   change rolls the pods;
//! - a Service `<name>` exposing `spec.port`;
//! - with `spec.auth.secretRef` (a Secret's `name` and `key`, the Secret a
//!   related object): the password in the env var `CACHE_PASSWORD` from
//!   that key and its value's hash in the pod-template annotation
//!   [`SECRET_HASH_ANNOTATION`], so rotating it rolls the pods. While the
//!   Secret or key is missing the Cache is `Pending` with `Available=False`,
//!   reason `SecretMissing`, and no child changes;
//! - with the Cargo feature `v2`: the label `apps.example.com/version: v2` on every
//!   child and a PodDisruptionBudget `<name>` (minAvailable 1).
//!
//! Its settings ([`CacheSettings`]) may give `defaultImage`, the image of a
//! Cache whose `spec.image` is empty.
//!
//! It reports `readyReplicas`, `phase` (Pending, Progressing, Ready, Paused,
//! Degraded) and the conditions `Available` and `Progressing`. A change of
//! `spec.image` after a first complete rollout is an upgrade ([`upgrade`]):
//! `Upgrading` and `Upgraded` report it, `status.lastGoodImage` is the last
//! image that ran on every replica, and a rollout that exceeds
//! `spec.upgrade.timeoutSeconds` (the Deployment's
//! `progressDeadlineSeconds`) is rolled back to it. While `paused` it keeps
//! every child as it is (the host neither writes nor prunes them). On
//! deletion its finalizer [`FINALIZER`] scales the Deployment to zero and
//! holds the Cache until the pods are gone.
//!
//! The logic is plain Rust ([`CacheOperator`] implements
//! [`wasmop_guest::Operator`]); only on wasm32 is it exported as a component.

mod admission;
mod api;
mod auth;
mod children;
pub mod conversion;
mod finalizer;
mod flavor;
mod observed;
mod pause;
mod reconcile;
pub mod registry;
mod status;
pub mod upgrade;

pub use admission::{DEFAULT_MAXMEMORY_POLICY, REDIS_DIRECTIVES};
pub use api::{
    Cache, CacheAuth, CacheSettings, CacheSpec, CacheStatus, CacheUpgrade, Phase, SecretKeyRef,
};
pub use auth::{PASSWORD_ENV, SECRET_HASH_ANNOTATION, SECRET_NAME_POINTER};
pub use children::{CONFIG_HASH_ANNOTATION, CONFIG_MOUNT_PATH, config_hash};
pub use finalizer::FINALIZER;
pub use flavor::{Flavor, VERSION_LABEL, VERSION_V2};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use wasmop_guest::admission::AdmissionResponse;
use wasmop_guest::{
    Admission, ChildKind, Conversion, Description, KindRef, Operator, RelatedKind, Request,
    Response, Result, Review, Settings,
};

/// The Cache operator, in the flavor this build was compiled as
/// ([`Flavor::CURRENT`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheOperator;

impl Operator for CacheOperator {
    fn describe(settings: &Settings) -> std::result::Result<Description, String> {
        let settings = CacheSettings::parse(settings)?;
        let mut description = describe_in(Flavor::CURRENT, settings.api_group.as_deref());
        settings
            .version()
            .clone_into(&mut description.primary.version);
        Ok(description)
    }

    fn reconcile(request: Request) -> Result<Response> {
        reconcile_at(&request, request.now(), Flavor::CURRENT)
    }
}

/// What `flavor` manages: Caches, with ConfigMaps, Deployments and Services
/// (and PodDisruptionBudgets in v2) as children, the Secret each Cache names
/// at [`SECRET_NAME_POINTER`] as a related object, and the finalizer.
pub fn describe(flavor: Flavor) -> Description {
    describe_in(flavor, None)
}

/// [`describe`] with the Cache kind in `group` (the setting `apiGroup`)
/// instead of its own.
pub fn describe_in(flavor: Flavor, group: Option<&str>) -> Description {
    let mut primary = KindRef::of::<Cache>();
    if let Some(group) = group {
        primary.group = group.to_owned();
    }
    let mut description = Description::new(primary)
        .related(RelatedKind::name_at(
            KindRef::of::<Secret>(),
            SECRET_NAME_POINTER,
        ))
        .child(ChildKind::of::<ConfigMap>())
        .child(ChildKind::of::<Deployment>())
        .child(ChildKind::of::<Service>());
    if flavor.is_v2() {
        description = description.child(ChildKind::of::<PodDisruptionBudget>());
    }
    description.finalizer(FINALIZER)
}

/// One reconcile as `flavor` at the time `now`: [`CacheOperator::reconcile`]
/// with the clock and the flavor made explicit, for tests and benchmarks.
pub fn reconcile_at(request: &Request, now: &Time, flavor: Flavor) -> Result<Response> {
    reconcile::reconcile(request, now, flavor)
}

impl Admission for CacheOperator {
    fn admit(review: &Review) -> AdmissionResponse {
        admission::admit(review)
    }
}

impl Conversion for CacheOperator {
    fn convert(
        object: serde_json::Value,
        desired_api_version: &str,
    ) -> std::result::Result<serde_json::Value, String> {
        conversion::convert(object, desired_api_version)
    }
}

#[cfg(target_arch = "wasm32")]
wasmop_guest::export_operator!(CacheOperator);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_stamps_transitions_with_the_requests_time() {
        let at = wasmop_guest::time::from_unix_seconds(1_714_564_800);
        let request = Request::new(
            serde_json::json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
                "metadata": {"name": "c", "generation": 1}, "spec": {"image": "redis:7.2"}}),
            vec![],
            false,
        )
        .at(at);
        let status = CacheOperator::reconcile(request)
            .unwrap()
            .status_value()
            .unwrap();
        for condition in status["conditions"].as_array().unwrap() {
            assert_eq!(condition["lastTransitionTime"], "2024-05-01T12:00:00Z");
        }
    }

    #[test]
    fn describe_names_the_cache_kind_its_children_and_the_finalizer() {
        let description = describe(Flavor::V1);
        assert_eq!(
            description.primary,
            KindRef::new("apps.example.com", "v1alpha1", "Cache")
        );
        let kinds: Vec<_> = description
            .children
            .iter()
            .map(|c| c.kind.kind.as_str())
            .collect();
        assert_eq!(kinds, ["ConfigMap", "Deployment", "Service"]);
        assert!(description.children.iter().all(|c| !c.cluster_scoped));
        assert_eq!(
            description.finalizer.as_deref(),
            Some("apps.example.com/cache-cleanup")
        );
    }

    #[test]
    fn describe_declares_the_disruption_budget_only_in_v2() {
        let kinds: Vec<_> = describe(Flavor::V2)
            .children
            .into_iter()
            .map(|c| c.kind)
            .collect();
        assert!(kinds.contains(&KindRef::new("policy", "v1", "PodDisruptionBudget")));
        assert!(
            !describe(Flavor::V1)
                .children
                .iter()
                .any(|c| c.kind.kind == "PodDisruptionBudget")
        );
    }

    #[test]
    fn the_current_flavor_follows_the_v2_feature() {
        assert_eq!(Flavor::CURRENT.is_v2(), cfg!(feature = "v2"));
        assert_eq!(
            CacheOperator::describe(&Settings::none()),
            Ok(describe(Flavor::CURRENT))
        );
    }

    #[test]
    fn describe_refuses_bad_settings_and_relates_the_named_secret() {
        let bad = Settings::from_json(Some(r#"{"defaultImage": ""}"#.into()));
        assert!(
            CacheOperator::describe(&bad)
                .unwrap_err()
                .contains("defaultImage")
        );
        let related = describe(Flavor::V1).related;
        assert_eq!(
            related,
            [RelatedKind::name_at(
                KindRef::new("", "v1", "Secret"),
                "/spec/auth/secretRef/name"
            )]
        );
    }
}
