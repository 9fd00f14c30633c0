//! CRDs as the tests and benches install them.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

/// Applies `crd` (server-side, as `wasmop-tests`) and waits until the API
/// server establishes it, for at most 30 s.
pub async fn install(client: &kube::Client, crd: &CustomResourceDefinition) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().context("a CRD without a name")?;
    api.patch(
        &name,
        &PatchParams::apply("wasmop-tests").force(),
        &Patch::Apply(crd),
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let established = api
            .get(&name)
            .await?
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "CRD {name} not established within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

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
