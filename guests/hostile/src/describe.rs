//! What the hostile guest describes: by default `Hostile` with ConfigMaps,
//! Services and Secrets as children; with the setting `describe`, one of
//! the descriptions the host must refuse when it loads the module.

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use wasmop_guest::{ChildKind, Description, KindRef, Settings};

use crate::{GROUP, KIND, VERSION};

/// The guest's settings.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostileSettings {
    /// Which description to give (see [`describe`]); absent: the real one.
    #[serde(default)]
    pub describe: Option<String>,
}

/// The real description.
pub fn honest() -> Description {
    Description::new(primary())
        .child(ChildKind::of::<ConfigMap>())
        .child(ChildKind::of::<Service>())
        .child(ChildKind::of::<Secret>())
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
pub fn describe(settings: &Settings) -> Result<Description, String> {
    let settings: HostileSettings = settings.get()?;
    let Some(attack) = settings.describe else {
        return Ok(honest());
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
        other => return Err(format!("unknown describe attack {other:?}")),
    })
}
