//! Re-emitting observed children unchanged, for the pause and cleanup paths.
//!
//! The host deletes every observed child that is not desired, so "leave it
//! alone" means "desire exactly what is observed", minus what the API server
//! and other controllers own.

use serde_json::Value;
use wasmop_guest::meta::strip_server_fields;

use crate::flavor::Flavor;

/// Annotations other controllers write on our children. Sending them back
/// would make the operator's field manager take them over and, once the
/// operator stops sending them, remove them.
const FOREIGN_ANNOTATIONS: &[&str] = &["deployment.kubernetes.io/revision"];

/// The observed children this flavor may return, each fit to be returned as
/// desired. A child of a kind the flavor does not declare (a v2
/// PodDisruptionBudget seen by v1 during a swap) is left out: the host would
/// refuse the whole answer for it.
pub fn kept_children<'a>(
    observed: impl Iterator<Item = &'a Value>,
    flavor: Flavor,
) -> impl Iterator<Item = &'a Value> {
    let declared = crate::describe(flavor).children;
    observed.filter(move |child| {
        let api_version = child.get("apiVersion").and_then(Value::as_str);
        let kind = child.get("kind").and_then(Value::as_str);
        declared.iter().any(|d| {
            api_version == Some(d.kind.api_version().as_str()) && kind == Some(d.kind.kind.as_str())
        })
    })
}

/// `observed` fit to be returned as desired so that nothing about it changes.
pub fn as_observed(observed: &Value) -> Value {
    let mut kept = strip_server_fields(observed);
    if let Some(metadata) = kept.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
    {
        for key in FOREIGN_ANNOTATIONS {
            annotations.remove(*key);
        }
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn as_observed_drops_server_fields_and_the_revision_annotation() {
        let observed = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "demo",
                "uid": "u",
                "resourceVersion": "1",
                "annotations": {"deployment.kubernetes.io/revision": "3"}
            },
            "spec": {"replicas": 2},
            "status": {"replicas": 2}
        });
        assert_eq!(
            as_observed(&observed),
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "demo"},
                "spec": {"replicas": 2}
            })
        );
    }

    #[test]
    fn kept_children_leaves_out_kinds_the_flavor_does_not_declare() {
        let observed = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "a"}}),
        ];
        assert_eq!(kept_children(observed.iter(), Flavor::V1).count(), 1);
        assert_eq!(kept_children(observed.iter(), Flavor::V2).count(), 2);
    }

    #[test]
    fn as_observed_keeps_other_annotations() {
        let observed = json!({"metadata": {"name": "x", "annotations": {"team": "a"}}});
        assert_eq!(as_observed(&observed), observed);
    }
}
