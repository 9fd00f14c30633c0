//! CRDs as the tests install them.

use serde_json::Value;

/// `crd` (a CustomResourceDefinition as JSON) reduced to its `version`
/// alone, served and stored, with no conversion: what a control plane
/// without the host's conversion webhook can serve. Fails when the CRD has
/// no such version.
pub fn single_version(mut crd: Value, version: &str) -> anyhow::Result<Value> {
    let spec = crd
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| anyhow::anyhow!("not a CRD: no spec"))?;
    spec.remove("conversion");
    let versions = spec
        .get_mut("versions")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| anyhow::anyhow!("not a CRD: no spec.versions"))?;
    versions.retain(|v| v["name"] == version);
    let kept = versions
        .first_mut()
        .ok_or_else(|| anyhow::anyhow!("the CRD has no version {version}"))?;
    kept["served"] = Value::Bool(true);
    kept["storage"] = Value::Bool(true);
    Ok(crd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_version_is_kept_served_and_stored_without_conversion() {
        let crd = json!({"spec": {"conversion": {"strategy": "Webhook"}, "versions": [
            {"name": "v1alpha1", "served": true, "storage": false},
            {"name": "v1beta1", "served": true, "storage": true}]}});
        let one = single_version(crd.clone(), "v1alpha1").unwrap();
        assert_eq!(
            one,
            json!({"spec": {"versions": [{"name": "v1alpha1", "served": true, "storage": true}]}})
        );
        assert!(single_version(crd, "v2").is_err());
    }
}
