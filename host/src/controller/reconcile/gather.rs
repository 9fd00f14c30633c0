//! The request a guest gets for one parent, gathered one way for the
//! controller, `wasmop plan` and `wasmop render`.
//!
//! Every object reaches the guest without the managedFields entries the
//! host keeps for its own use; each Secret among the observed children is
//! concealed unless the guest's entry says `secretValues: true` (the host
//! keeps its children's values for the drift check). Related objects are
//! concealed, stripped to their metadata where declared so, and bounded
//! where they are read (the controller's related cache, `plan`'s lists,
//! `render`'s input), so they come here as the guest may see them.

use kube::api::DynamicObject;
use serde_json::Value;

use crate::model::Request;

/// `object` as JSON.
pub fn value(object: &DynamicObject) -> Value {
    serde_json::to_value(object).expect("objects serialise")
}

/// An object as a guest is shown it: without its managedFields.
fn shown(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    object
}

/// The request for `parent`: its `observed` children of the kinds the
/// guest declares, and its `related` objects as read.
pub fn request(
    parent: Value,
    observed: impl IntoIterator<Item = Value>,
    related: impl IntoIterator<Item = Value>,
    deleting: bool,
    secret_values: bool,
) -> Request {
    Request {
        parent: shown(parent),
        observed: observed
            .into_iter()
            .map(|child| {
                let mut child = shown(child);
                if !secret_values {
                    crate::secrets::conceal(&mut child);
                }
                child
            })
            .collect(),
        deleting,
        related: related.into_iter().map(shown).collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `value` as the API server's objects reach the host.
    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn children_are_concealed_and_nothing_carries_managed_fields() {
        let managed = json!([{"manager": "wasmop", "operation": "Apply"}]);
        let parent = value(&object(
            json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": "c", "namespace": "d", "managedFields": managed}}),
        ));
        let secret = value(&object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "d", "managedFields": managed},
            "data": {"password": "aHVudGVyMg=="}})));
        let related = value(&object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "r", "namespace": "d", "managedFields": managed}})));

        let request = request(
            parent.clone(),
            [secret.clone()],
            [related.clone()],
            true,
            false,
        );
        for value in [&request.parent, &request.observed[0], &request.related[0]] {
            assert!(
                value.pointer("/metadata/managedFields").is_none(),
                "{value}"
            );
        }
        assert_ne!(request.observed[0]["data"]["password"], "aHVudGVyMg==");
        assert!(request.deleting);

        let shown = super::request(parent, [secret], [], false, true);
        assert_eq!(shown.observed[0]["data"]["password"], "aHVudGVyMg==");
    }
}
