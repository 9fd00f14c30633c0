//! The {{name}} guest: for every `{{Kind}}` a ConfigMap `<name>-data` holding
//! `spec.data`, and a `Ready` condition.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::{Deserialize, Serialize};
use wasmop_guest::condition::{ConditionStatus, set_condition};
use wasmop_guest::{
    ChildKind, Description, Error, KindRef, Operator, Request, Response, Result, Settings, meta,
};

/// The `{{Kind}}`'s spec.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Spec {
    data: BTreeMap<String, String>,
}

/// What the guest reads of a `{{Kind}}`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Parent {
    spec: Spec,
    status: Option<Status>,
}

/// The `{{Kind}}`'s status.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Status {
    #[serde(skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    conditions: Vec<Condition>,
}

/// The {{name}} operator.
pub struct Guest;

impl Operator for Guest {
    fn describe(_settings: &Settings) -> std::result::Result<Description, String> {
        Ok(
            Description::new(KindRef::new("{{group}}", "v1alpha1", "{{Kind}}"))
                .child(ChildKind::of::<ConfigMap>()),
        )
    }

    fn reconcile(request: Request) -> Result<Response> {
        let parent: Parent = request.parent_as()?;
        let name = request.parent_name();
        if name.is_empty() {
            return Err(Error::permanent("the {{Kind}} has no metadata.name"));
        }
        let config_map = ConfigMap {
            metadata: meta::object_meta(
                format!("{name}-data"),
                meta::labels([("app.kubernetes.io/name", "{{name}}")]),
            ),
            data: Some(parent.spec.data),
            ..ConfigMap::default()
        };
        let mut conditions = parent.status.map(|s| s.conditions).unwrap_or_default();
        set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::True,
            "ConfigMapApplied",
            &format!("ConfigMap {name}-data holds spec.data"),
            request.parent_generation(),
            request.now(),
        );
        let status = Status {
            phase: Some("Ready".into()),
            conditions,
        };
        Response::new().child(&config_map)?.status(&status)
    }
}

wasmop_guest::export_operator!(Guest);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_parent_gets_its_config_map_and_is_ready() {
        let request = Request::new(
            json!({"apiVersion": "{{group}}/v1alpha1", "kind": "{{Kind}}",
                "metadata": {"name": "sample", "generation": 1},
                "spec": {"data": {"greeting": "hello"}}}),
            vec![],
            false,
        );
        let response = Guest::reconcile(request).unwrap();
        let children = response.child_values();
        assert_eq!(children[0]["metadata"]["name"], "sample-data");
        assert_eq!(children[0]["data"]["greeting"], "hello");
        let status = response.status_value().unwrap();
        assert_eq!(status["conditions"][0]["status"], "True");
    }
}
