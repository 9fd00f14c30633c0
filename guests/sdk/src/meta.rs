//! Owner-independent object metadata.
//!
//! A guest names and labels its children; everything that ties a child to its
//! parent (namespace, controller ownerReference, the `wasmop.dev/guest` label)
//! is stamped by the host, so these helpers never set it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

/// The label the host puts on every child, naming the guest that owns it.
/// A guest must not set it (the host refuses one that points elsewhere).
pub const GUEST_LABEL: &str = "wasmop.dev/guest";

/// A label map from pairs. A `BTreeMap`, so it serializes in sorted order.
pub fn labels<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Metadata with a name and labels, and nothing the host stamps. Empty labels
/// are left out rather than written as `{}`.
pub fn object_meta(name: impl Into<String>, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: (!labels.is_empty()).then_some(labels),
        ..ObjectMeta::default()
    }
}

/// Metadata fields the API server or the host owns; a guest that re-emits an
/// observed object as desired must not send them back.
const SERVER_METADATA: &[&str] = &[
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "managedFields",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

/// A copy of an observed object fit to be sent back as desired: without
/// `status`, without the metadata the API server or the host owns (uid,
/// resourceVersion, managedFields, creationTimestamp, generation,
/// ownerReferences, namespace, finalizers, ...) and without the host's
/// `wasmop.dev/guest` label. Used to keep a child exactly as it is, e.g.
/// while a parent is paused.
pub fn strip_server_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(fields) = copy.as_object_mut() {
        fields.remove("status");
    }
    if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SERVER_METADATA {
            metadata.remove(*field);
        }
        if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
            labels.remove(GUEST_LABEL);
            if labels.is_empty() {
                metadata.remove("labels");
            }
        }
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_meta_sets_only_name_and_labels() {
        let meta = object_meta("demo", labels([("app", "cache")]));
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            json!({"name": "demo", "labels": {"app": "cache"}})
        );
    }

    #[test]
    fn object_meta_leaves_out_empty_labels() {
        let meta = object_meta("demo", BTreeMap::new());
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            json!({"name": "demo"})
        );
    }

    #[test]
    fn strip_server_fields_keeps_spec_and_own_metadata() {
        let observed = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "demo",
                "namespace": "default",
                "uid": "1234",
                "resourceVersion": "7",
                "generation": 2,
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "managedFields": [{"manager": "x"}],
                "ownerReferences": [{"uid": "abcd"}],
                "labels": {"app": "cache", "wasmop.dev/guest": "cache"},
                "annotations": {"a": "b"}
            },
            "data": {"k": "v"},
            "status": {"x": 1}
        });
        assert_eq!(
            strip_server_fields(&observed),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "demo",
                    "labels": {"app": "cache"},
                    "annotations": {"a": "b"}
                },
                "data": {"k": "v"}
            })
        );
    }

    #[test]
    fn strip_server_fields_drops_a_label_map_left_empty() {
        let observed = json!({"metadata": {"name": "x", "labels": {"wasmop.dev/guest": "g"}}});
        assert_eq!(
            strip_server_fields(&observed),
            json!({"metadata": {"name": "x"}})
        );
    }
}
