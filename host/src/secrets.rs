//! Secrets stay secret: what a guest, a log line or `wasmop render` gets
//! to see of a Secret.
//!
//! A guest sees Secrets only of kinds it declared (children it owns,
//! related Secrets it reads). Unless its guest-list entry says
//! `secretValues: true`, every value of a Secret's `data` reaches it as the
//! base64 of `sha256:<hex>`, the SHA-256 of the value: enough to see that
//! the Secret exists, which keys it has, and when a value changes (to roll
//! pods), never the value. `stringData` (never returned by the API server,
//! but present in a Secret a user hands `render`) gets the same treatment.
//! Annotations often hold copies of the whole object (`kubectl apply`'s
//! `kubectl.kubernetes.io/last-applied-configuration`, other tools' own):
//! that one is removed and every other annotation value becomes its
//! `sha256:<hex>` too, keys kept. The host
//! conceals related Secrets as they enter its cache, so their values are
//! not even in its memory.

use base64::Engine as _;
use kube::api::DynamicObject;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What a concealed value starts with.
pub const DIGEST_PREFIX: &str = "sha256:";
/// The annotation `kubectl apply` writes the object it sent to.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether `object` (JSON) is a core v1 Secret.
pub fn is_secret(object: &Value) -> bool {
    object.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && object.get("kind").and_then(Value::as_str) == Some("Secret")
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    format!("{DIGEST_PREFIX}{}", hex::encode(Sha256::digest(bytes)))
}

/// Replaces every value of a Secret's `data` (base64) and `stringData`
/// (text) by its digest, as base64 and text respectively, removes the
/// last-applied annotation and replaces every other annotation value by its
/// digest. Anything but a Secret is left as it is.
pub fn conceal(object: &mut Value) {
    if !is_secret(object) {
        return;
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    if let Some(data) = object.get_mut("data").and_then(Value::as_object_mut) {
        for value in data.values_mut() {
            let bytes = value
                .as_str()
                .and_then(|text| b64.decode(text).ok())
                .unwrap_or_else(|| value.to_string().into_bytes());
            *value = Value::String(b64.encode(digest(&bytes)));
        }
    }
    if let Some(data) = object.get_mut("stringData").and_then(Value::as_object_mut) {
        for value in data.values_mut() {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            *value = Value::String(digest(text.as_bytes()));
        }
    }
    if let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
        for value in annotations.values_mut() {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            *value = Value::String(digest(text.as_bytes()));
        }
    }
}

/// [`conceal`] for an object in a typed cache.
pub fn conceal_object(object: &mut DynamicObject) {
    let secret = object
        .types
        .as_ref()
        .is_some_and(|t| t.api_version == "v1" && t.kind == "Secret");
    if !secret {
        return;
    }
    if let Some(annotations) = object.metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        for value in annotations.values_mut() {
            *value = digest(value.as_bytes());
        }
    }
    let mut whole = serde_json::json!({"apiVersion": "v1", "kind": "Secret"});
    for key in ["data", "stringData"] {
        if let Some(value) = object.data.get(key) {
            whole[key] = value.clone();
        }
    }
    conceal(&mut whole);
    for key in ["data", "stringData"] {
        if let Some(value) = whole.get(key) {
            object.data[key] = value.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "auth", "annotations": {
                LAST_APPLIED: "{\"stringData\":{\"password\":\"hunter2\"}}",
                "keep": "me",
                "kapp.k14s.io/original": "{\"data\":{\"password\":\"aHVudGVyMg==\"}}",
            }},
            // "hunter2"
            "data": {"password": "aHVudGVyMg=="},
            "stringData": {"token": "t0ken"},
        })
    }

    #[test]
    fn a_concealed_secret_keeps_its_keys_and_shows_digests_only() {
        let mut s = secret();
        conceal(&mut s);
        let text = s.to_string();
        assert!(
            !text.contains("hunter2") && !text.contains("aHVudGVyMg==") && !text.contains("t0ken"),
            "{text}"
        );
        let b64 = base64::engine::general_purpose::STANDARD;
        let password = b64.decode(s["data"]["password"].as_str().unwrap()).unwrap();
        assert_eq!(String::from_utf8(password).unwrap(), digest(b"hunter2"));
        assert_eq!(s["stringData"]["token"], digest(b"t0ken"));
        assert_eq!(
            s["metadata"]["annotations"],
            json!({"keep": digest(b"me"), "kapp.k14s.io/original": digest(br#"{"data":{"password":"aHVudGVyMg=="}}"#)})
        );
        assert!(digest(b"hunter2").starts_with("sha256:") && digest(b"hunter2").len() == 71);
    }

    #[test]
    fn other_kinds_are_left_alone() {
        let mut cm =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"password": "hunter2"}});
        let before = cm.clone();
        conceal(&mut cm);
        assert_eq!(cm, before);
        let mut other =
            json!({"apiVersion": "example.com/v1", "kind": "Secret", "data": {"a": "b"}});
        let before = other.clone();
        conceal(&mut other);
        assert_eq!(other, before);
    }

    #[test]
    fn a_cached_secret_is_concealed_in_place() {
        let mut object: DynamicObject = serde_json::from_value(secret()).unwrap();
        conceal_object(&mut object);
        let text = serde_json::to_string(&object).unwrap();
        assert!(
            !text.contains("aHVudGVyMg==") && !text.contains("hunter2") && !text.contains("t0ken"),
            "{text}"
        );
        let annotations = object.metadata.annotations.unwrap();
        assert_eq!(annotations["keep"], digest(b"me"));
        assert!(!annotations.contains_key(LAST_APPLIED));
    }
}
