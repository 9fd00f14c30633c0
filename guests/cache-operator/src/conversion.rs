//! `Cache` in its two versions, and the conversion between them.
//!
//! `v1alpha1` (the seeds' shape): `spec.port`, and `spec.config` as a map of
//! names to values. `v1beta1`: `spec.ports.client`, and `spec.config` as a
//! list of `{name, value}` sorted by name. Everything else (metadata, status
//! with `lastGoodImage` and `failedImage`, the other spec fields such as
//! `upgrade`, fields this guest does not know) is carried as it is, so a
//! round trip through the other version gives back the same object.

use serde_json::{Map, Value};

/// The first version, the one the seeds define.
pub const V1ALPHA1: &str = "v1alpha1";
/// The second version, with `spec.ports` and `spec.config` as a list.
pub const V1BETA1: &str = "v1beta1";

/// `object` (a Cache in either version) in `desired_api_version`
/// (`<group>/v1alpha1` or `<group>/v1beta1`).
///
/// # Errors
/// An unknown version, an object of another version, or a spec whose shape
/// does not fit the version it claims.
pub fn convert(mut object: Value, desired_api_version: &str) -> Result<Value, String> {
    let (group, desired) = desired_api_version
        .split_once('/')
        .ok_or_else(|| format!("{desired_api_version:?} is not <group>/<version>"))?;
    let current = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/'))
        .map(|(g, v)| (g.to_owned(), v.to_owned()))
        .ok_or("the object has no apiVersion <group>/<version>")?;
    if current.0 != group {
        return Err(format!(
            "cannot convert a Cache of group {} to group {group}",
            current.0
        ));
    }
    let spec = object.get_mut("spec").and_then(Value::as_object_mut);
    match (current.1.as_str(), desired) {
        (V1ALPHA1, V1BETA1) => {
            if let Some(spec) = spec {
                up(spec)?;
            }
        }
        (V1BETA1, V1ALPHA1) => {
            if let Some(spec) = spec {
                down(spec)?;
            }
        }
        (V1ALPHA1, V1ALPHA1) | (V1BETA1, V1BETA1) => {}
        (from, to) => return Err(format!("cannot convert a Cache from {from} to {to}")),
    }
    object["apiVersion"] = Value::String(desired_api_version.to_owned());
    Ok(object)
}

/// The v1alpha1 spec as v1beta1, in place.
fn up(spec: &mut Map<String, Value>) -> Result<(), String> {
    if let Some(port) = spec.remove("port") {
        spec.insert("ports".into(), serde_json::json!({ "client": port }));
    }
    if let Some(config) = spec.remove("config") {
        let Value::Object(config) = config else {
            return Err("v1alpha1 spec.config must be a map".into());
        };
        let list = config
            .into_iter()
            .map(|(name, value)| serde_json::json!({"name": name, "value": value}))
            .collect();
        spec.insert("config".into(), Value::Array(list));
    }
    Ok(())
}

/// The v1beta1 spec as v1alpha1, in place.
fn down(spec: &mut Map<String, Value>) -> Result<(), String> {
    if let Some(ports) = spec.remove("ports") {
        let Value::Object(mut ports) = ports else {
            return Err("v1beta1 spec.ports must be an object".into());
        };
        if let Some(client) = ports.remove("client") {
            spec.insert("port".into(), client);
        }
        if let Some(other) = ports.keys().next() {
            return Err(format!(
                "v1beta1 spec.ports.{other} has no v1alpha1 equivalent"
            ));
        }
    }
    if let Some(config) = spec.remove("config") {
        let Value::Array(list) = config else {
            return Err("v1beta1 spec.config must be a list".into());
        };
        let mut map = Map::new();
        for entry in list {
            let name = entry
                .get("name")
                .and_then(Value::as_str)
                .ok_or("every v1beta1 spec.config entry needs a name")?;
            let value = entry
                .get("value")
                .cloned()
                .unwrap_or(Value::String(String::new()));
            if map.insert(name.to_owned(), value).is_some() {
                return Err(format!("v1beta1 spec.config names {name:?} twice"));
            }
        }
        spec.insert("config".into(), Value::Object(map));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ALPHA: &str = "apps.example.com/v1alpha1";
    const BETA: &str = "apps.example.com/v1beta1";

    fn alpha(spec: Value) -> Value {
        json!({"apiVersion": ALPHA, "kind": "Cache",
            "metadata": {"name": "c", "namespace": "n", "uid": "u", "labels": {"a": "b"}},
            "spec": spec, "status": {"phase": "Ready", "readyReplicas": 2}})
    }

    #[test]
    fn every_sample_round_trips_byte_for_byte() {
        let samples = [
            json!({"image": "redis:7.2"}),
            json!({"image": "redis:7.2", "replicas": 2, "port": 6380,
                "config": {"redis.conf": "maxmemory 64mb\n", "maxmemory-policy": "allkeys-lru"},
                "paused": true, "auth": {"secretRef": {"name": "s", "key": "k"}}}),
            json!({"image": "redis:7.2", "config": {}}),
            json!({"image": "redis:7.2", "port": 1, "unknownField": {"kept": true}}),
            json!({"image": "redis:7.4-never-ready", "upgrade": {"timeoutSeconds": 30}}),
            json!({"image": "redis:7.2", "upgrade": {}}),
        ];
        let upgraded = |mut object: Value| {
            object["status"] = json!({"phase": "Degraded", "readyReplicas": 1,
                "lastGoodImage": "redis:7.2", "failedImage": "redis:7.4-never-ready",
                "conditions": [{"type": "Upgraded", "status": "False", "reason": "RolledBack",
                    "message": "m", "lastTransitionTime": "2024-05-01T12:00:00Z"}]});
            object
        };
        let with_upgrade_status = samples.clone().into_iter().map(alpha).map(upgraded);
        for object in samples.into_iter().map(alpha).chain(with_upgrade_status) {
            let beta = convert(object.clone(), BETA).unwrap();
            assert_eq!(beta["apiVersion"], BETA);
            assert!(beta["spec"].get("port").is_none());
            assert_eq!(beta["status"], object["status"]);
            assert_eq!(beta["spec"].get("upgrade"), object["spec"].get("upgrade"));
            let back = convert(beta.clone(), ALPHA).unwrap();
            assert_eq!(convert(back.clone(), BETA).unwrap(), beta);
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                serde_json::to_string(&object).unwrap()
            );
        }
    }

    #[test]
    fn v1beta1_has_the_new_shape_and_converts_back() {
        let beta = convert(
            alpha(json!({"port": 7000, "config": {"b": "2", "a": "1"}})),
            BETA,
        )
        .unwrap();
        assert_eq!(beta["spec"]["ports"], json!({"client": 7000}));
        assert_eq!(
            beta["spec"]["config"],
            json!([{"name": "a", "value": "1"}, {"name": "b", "value": "2"}])
        );
        assert_eq!(beta["metadata"], alpha(json!({}))["metadata"]);
        assert_eq!(beta["status"], alpha(json!({}))["status"]);
    }

    #[test]
    fn what_does_not_fit_is_an_error_naming_it() {
        let twice = json!({"apiVersion": BETA, "kind": "Cache", "metadata": {},
            "spec": {"config": [{"name": "a", "value": "1"}, {"name": "a", "value": "2"}]}});
        assert!(convert(twice, ALPHA).unwrap_err().contains("\"a\" twice"));
        let other_port = json!({"apiVersion": BETA, "kind": "Cache", "metadata": {},
            "spec": {"ports": {"client": 1, "admin": 2}}});
        assert!(
            convert(other_port, ALPHA)
                .unwrap_err()
                .contains("ports.admin")
        );
        assert!(convert(alpha(json!({})), "apps.example.com/v9").is_err());
        assert!(convert(alpha(json!({})), "other.example.com/v1beta1").is_err());
        assert!(convert(alpha(json!({})), "v1beta1").is_err());
    }
}
