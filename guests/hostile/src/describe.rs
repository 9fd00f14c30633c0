//! What the hostile guest describes: by default `Hostile` with ConfigMaps,
//! Services and Secrets as children; the setting `primary` reconciles
//! another kind of the group instead (one module, two guests), `related`
//! adds related kinds; with the setting `describe`, one of the descriptions
//! the host must refuse when it loads the module.

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use wasmop_guest::{ChildKind, Description, KindRef, RelatedKind, Settings};

use crate::{GROUP, KIND, VERSION};

/// The guest's settings.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostileSettings {
    /// Which description to give (see [`describe`]); absent: the real one.
    #[serde(default)]
    pub describe: Option<String>,
    /// The kind (of group `test.wasmop.dev`, version `v1alpha1`) to
    /// reconcile; absent: `Hostile`.
    #[serde(default)]
    pub primary: Option<String>,
    /// Declare related kinds: the Secret named at `/spec/target` and the
    /// ConfigMaps selected by the labels at `/spec/selector`.
    #[serde(default)]
    pub related: bool,
    /// With `related`: watch and receive the ConfigMaps' metadata only.
    #[serde(default, rename = "metadataOnly")]
    pub metadata_only: bool,
    /// Every reconcile makes this attack, whatever the parent's
    /// `spec.attack` says: one module that misbehaves as a rollout's
    /// candidate and not as its stable version.
    #[serde(default)]
    pub attack: Option<String>,
}

/// The real description.
pub fn honest() -> Description {
    honest_for(KIND)
}

fn honest_for(kind: &str) -> Description {
    Description::new(KindRef::new(GROUP, VERSION, kind))
        .child(ChildKind::of::<ConfigMap>())
        .child(ChildKind::of::<Service>())
        .child(ChildKind::of::<Secret>())
}

/// The related kinds the setting `related` declares; `metadata_only`
/// makes the ConfigMaps metadata-only.
pub fn related(metadata_only: bool) -> [RelatedKind; 2] {
    let config_maps = RelatedKind::selector_at(KindRef::of::<ConfigMap>(), "/spec/selector");
    [
        RelatedKind::name_at(KindRef::of::<Secret>(), "/spec/target"),
        if metadata_only {
            config_maps.metadata_only()
        } else {
            config_maps
        },
    ]
}

fn primary() -> KindRef {
    KindRef::new(GROUP, VERSION, KIND)
}

/// The description chosen by `settings.describe`:
///
/// | `describe` | the description |
/// |---|---|
/// | absent | [`honest`] |
/// | `builtin-primary` | reconciles core v1 Secrets |
/// | `child-is-primary` | declares `Hostile` as its own child |
/// | `duplicate-child` | declares ConfigMap twice |
/// | `two-versions` | declares HorizontalPodAutoscaler in v1 and v2 |
/// | `wildcard` | a child kind `*` in group `*` |
/// | `empty-kind` | a child with an empty kind |
/// | `bad-finalizer` | the finalizer `cleanup` (no domain prefix) |
/// | `too-many-children` | 100 child kinds |
/// | `refuse-settings` | refuses its settings |
/// | `related-wildcard` | a related kind `*` in group `*` |
/// | `related-bad-pointer` | a related name at `spec/target` (no leading `/`) |
/// | `related-duplicate` | relates Secrets twice |
/// | `related-too-many` | 40 related kinds |
/// | `related-cluster-scoped` | relates IngressClasses (cluster-scoped) |
/// | `privileged-child` | a RoleBinding child (a kind that grants power) |
/// | `privileged-related` | relates ServiceAccounts (a kind that grants power) |
/// | `extra-kind` | [`honest`] and batch/v1 Jobs, a kind its identity may not watch |
/// | `long-refusal` | refuses its settings with 2 MiB of text |
pub fn describe(settings: &Settings) -> Result<Description, String> {
    let settings: HostileSettings = settings.get()?;
    let Some(attack) = settings.describe else {
        let mut description = honest_for(settings.primary.as_deref().unwrap_or(KIND));
        if settings.related {
            description = related(settings.metadata_only)
                .into_iter()
                .fold(description, Description::related);
        }
        return Ok(description);
    };
    Ok(match attack.as_str() {
        "builtin-primary" => {
            Description::new(KindRef::of::<Secret>()).child(ChildKind::of::<ConfigMap>())
        }
        "child-is-primary" => honest().child(ChildKind::namespaced(primary())),
        "duplicate-child" => honest().child(ChildKind::of::<ConfigMap>()),
        "two-versions" => honest()
            .child(ChildKind::namespaced(KindRef::new(
                "autoscaling",
                "v1",
                "HorizontalPodAutoscaler",
            )))
            .child(ChildKind::namespaced(KindRef::new(
                "autoscaling",
                "v2",
                "HorizontalPodAutoscaler",
            ))),
        "wildcard" => honest().child(ChildKind::namespaced(KindRef::new("*", "v1", "*"))),
        "empty-kind" => honest().child(ChildKind::namespaced(KindRef::new("", "v1", ""))),
        "bad-finalizer" => honest().finalizer("cleanup"),
        "too-many-children" => (0..100).fold(honest(), |d, i| {
            d.child(ChildKind::namespaced(KindRef::new(
                "example.com",
                "v1",
                format!("Kind{i}"),
            )))
        }),
        "refuse-settings" => return Err("these settings are refused on purpose".into()),
        "related-wildcard" => {
            honest().related(RelatedKind::namespace(KindRef::new("*", "v1", "*")))
        }
        "related-bad-pointer" => {
            honest().related(RelatedKind::name_at(KindRef::of::<Secret>(), "spec/target"))
        }
        "related-duplicate" => honest()
            .related(RelatedKind::name_at(
                KindRef::of::<Secret>(),
                "/spec/target",
            ))
            .related(RelatedKind::namespace(KindRef::of::<Secret>())),
        "related-too-many" => (0..40).fold(honest(), |d, i| {
            d.related(RelatedKind::namespace(KindRef::new(
                "example.com",
                "v1",
                format!("Kind{i}"),
            )))
        }),
        // A cluster-scoped kind that grants no power (a Namespace would be
        // refused as one that does, before its scope is looked up).
        "related-cluster-scoped" => honest().related(RelatedKind::namespace(KindRef::new(
            "networking.k8s.io",
            "v1",
            "IngressClass",
        ))),
        "privileged-child" => honest().child(ChildKind::namespaced(KindRef::new(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
        ))),
        "privileged-related" => honest().related(RelatedKind::namespace(KindRef::new(
            "",
            "v1",
            "ServiceAccount",
        ))),
        "extra-kind" => honest().child(ChildKind::namespaced(KindRef::new("batch", "v1", "Job"))),
        "long-refusal" => return Err(crate::attack::long_error()),
        other => return Err(format!("unknown describe attack {other:?}")),
    })
}
