//! One conversion request: the objects of a `ConversionReview` converted by
//! the guest, each answer checked against the object it came from.
//!
//! The API server checks that a converted object keeps its name, namespace
//! and uid; the host checks them too, and the count, the desired
//! apiVersion and the kind, so a guest's mistake is reported with the
//! guest's name instead of as an API server error about the webhook.

use serde_json::Value;
use wasmop_contract::names::{HOST_CONDITION, is_host_key};

/// Why converted objects are refused.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConvertedError(String);

/// The guest's converted `texts`, parsed and checked against `objects`.
pub fn check(
    objects: &[Value],
    texts: Vec<String>,
    desired_api_version: &str,
) -> Result<Vec<Value>, ConvertedError> {
    if texts.len() != objects.len() {
        return Err(ConvertedError(format!(
            "answered {} objects for {}",
            texts.len(),
            objects.len()
        )));
    }
    objects
        .iter()
        .zip(texts)
        .enumerate()
        .map(|(i, (original, text))| {
            let converted: Value = serde_json::from_str(&text)
                .map_err(|e| ConvertedError(format!("object {i} is not JSON: {e}")))?;
            if !converted.is_object() {
                return Err(ConvertedError(format!("object {i} is not a JSON object")));
            }
            if converted["apiVersion"] != desired_api_version {
                return Err(ConvertedError(format!(
                    "object {i} has apiVersion {}, not {desired_api_version}",
                    converted["apiVersion"]
                )));
            }
            if converted["kind"] != original["kind"] {
                return Err(ConvertedError(format!("object {i} changed its kind")));
            }
            // A conversion changes the object's shape, not who holds it or
            // what keeps it (the WIT: no finalizers, no ownerReferences).
            for field in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "finalizers",
                "ownerReferences",
            ] {
                if converted["metadata"][field] != original["metadata"][field] {
                    return Err(ConvertedError(format!(
                        "object {i} changed metadata.{field}"
                    )));
                }
            }
            // The API server keeps a conversion's labels, annotations and
            // status: the host's own keys and condition must pass unchanged.
            for field in ["labels", "annotations"] {
                let host_keys = |o: &Value| -> Vec<(String, Value)> {
                    o["metadata"][field]
                        .as_object()
                        .map(|m| {
                            m.iter()
                                .filter(|(k, _)| is_host_key(k))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                if host_keys(&converted) != host_keys(original) {
                    return Err(ConvertedError(format!(
                        "object {i} changed metadata.{field} under wasmop.dev/"
                    )));
                }
            }
            let host_condition = |o: &Value| -> Option<Value> {
                o["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == HOST_CONDITION)
                    .cloned()
            };
            if host_condition(&converted) != host_condition(original) {
                return Err(ConvertedError(format!(
                    "object {i} changed the host's condition {HOST_CONDITION}"
                )));
            }
            Ok(converted)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(version: &str) -> Value {
        json!({"apiVersion": format!("g.io/{version}"), "kind": "K",
            "metadata": {"name": "a", "namespace": "n", "uid": "u"}, "spec": {}})
    }

    #[test]
    fn a_faithful_answer_passes() {
        let out = check(&[object("v1")], vec![object("v2").to_string()], "g.io/v2").unwrap();
        assert_eq!(out, [object("v2")]);
    }

    #[test]
    fn a_hostile_answer_is_refused_with_the_reason() {
        let original = [object("v1")];
        let mut renamed = object("v2");
        renamed["metadata"]["name"] = json!("b");
        let mut rekinded = object("v2");
        rekinded["kind"] = json!("Secret");
        let mut relabelled = object("v2");
        relabelled["metadata"]["labels"] = json!({"wasmop.dev/guest": "other"});
        let mut held = object("v2");
        held["metadata"]["finalizers"] = json!(["x.io/keep"]);
        let mut owned = object("v2");
        owned["metadata"]["ownerReferences"] =
            json!([{"kind": "Namespace", "name": "kube-system"}]);
        let mut recondition = object("v2");
        recondition["status"] =
            json!({"conditions": [{"type": "GuestReconciled", "status": "True"}]});
        for (texts, says) in [
            (vec![], "answered 0 objects for 1"),
            (vec![object("v2").to_string(); 2], "answered 2"),
            (vec!["{".into()], "not JSON"),
            (vec!["[]".into()], "not a JSON object"),
            (vec![object("v1").to_string()], "apiVersion"),
            (vec![renamed.to_string()], "metadata.name"),
            (vec![rekinded.to_string()], "kind"),
            (vec![relabelled.to_string()], "under wasmop.dev/"),
            (vec![recondition.to_string()], "GuestReconciled"),
            (vec![held.to_string()], "metadata.finalizers"),
            (vec![owned.to_string()], "metadata.ownerReferences"),
        ] {
            let err = check(&original, texts, "g.io/v2").unwrap_err();
            assert!(err.to_string().contains(says), "{err}");
        }
    }
}
