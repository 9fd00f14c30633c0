//! The hostile guest's `admit` and `convert`: what each does is chosen by
//! the object's `spec.attack`, as in `reconcile`.
//!
//! | attack | `admit` | `convert` | the host must |
//! |---|---|---|---|
//! | `admit-loop` | spins forever | | stop it at the deadline and answer per `admissionFailurePolicy` |
//! | `admit-memory` | fills memory | | cap it, answer per the policy |
//! | `admit-trap` | executes `unreachable` | | contain it, answer per the policy |
//! | `admit-deny` | denies with "hostile says no" and code 422 | | pass the denial on |
//! | `admit-bad-code` | denies with code 200 | | refuse the verdict |
//! | `admit-warnings` | admits with 1000 warnings | | refuse the verdict |
//! | `admit-rename`, `admit-owner`, `admit-finalizer`, `admit-host-label`, `admit-status`, `admit-kind` | patches that part of the object | | refuse the patch |
//! | `admit-bad-patch` | a patch that is not a JSON Patch | | refuse it |
//! | `admit-copy-bomb` | a 3 kB patch whose 40 copies would double the spec 40 times | | refuse it past `maxResponseBytes` |
//! | `admit-front-inserts` | 5000 inserts at the front of one list | | refuse it past 4096 operations |
//! | `convert-rename` | | renames the object | refuse the answer |
//! | `convert-drop` | | answers no objects | refuse the answer |
//! | `convert-stale` | | leaves the apiVersion as it was | refuse the answer |
//! | `convert-host-label` | | labels the object `wasmop.dev/guest: someone-else` | refuse the answer |
//! | `convert-host-condition` | | forges the host's `GuestReconciled` condition | refuse the answer |
//! | `convert-finalizer` | | adds a finalizer | refuse the answer |
//! | `convert-owner` | | adds an ownerReference | refuse the answer |
//! | `convert-loop` | | spins forever | stop it at the deadline |
//!
//! Anything else: `admit` admits unchanged (labelling the object
//! `hostile: admitted` when mutating), `convert` sets the apiVersion.

use serde_json::{Value, json};
use wasmop_guest::admission::{AdmissionResponse, Patch, Review};

use crate::attack;

fn attack_of(object: &Value) -> &str {
    object["spec"]["attack"].as_str().unwrap_or("none")
}

fn patched(ops: Value) -> AdmissionResponse {
    AdmissionResponse {
        patch: Some(ops.to_string()),
        ..AdmissionResponse::allow()
    }
}

/// The hostile `admit`.
pub fn admit(review: &Review) -> AdmissionResponse {
    let object: Value = review.object_as().ok().flatten().unwrap_or(Value::Null);
    match attack_of(&object) {
        "admit-loop" => attack::spin(),
        "admit-memory" => attack::exhaust_memory(),
        "admit-trap" => attack::unreachable(),
        "admit-deny" => AdmissionResponse {
            code: Some(422),
            ..AdmissionResponse::deny("hostile says no")
        },
        "admit-bad-code" => AdmissionResponse {
            code: Some(200),
            ..AdmissionResponse::deny("a denial that claims success")
        },
        "admit-warnings" => AdmissionResponse {
            warnings: vec!["w".into(); 1000],
            ..AdmissionResponse::allow()
        },
        "admit-rename" => {
            patched(json!([{"op": "replace", "path": "/metadata/name", "value": "renamed"}]))
        }
        "admit-owner" => patched(
            json!([{"op": "add", "path": "/metadata/ownerReferences", "value": [
                {"apiVersion": "v1", "kind": "Namespace", "name": "kube-system", "uid": "00000000-0000-0000-0000-000000000000", "controller": true}
            ]}]),
        ),
        "admit-finalizer" => patched(
            json!([{"op": "add", "path": "/metadata/finalizers", "value": ["hostile.example.com/never"]}]),
        ),
        "admit-host-label" => patched(
            json!([{"op": "add", "path": "/metadata/labels", "value": {"wasmop.dev/guest": "someone-else"}}]),
        ),
        "admit-status" => patched(json!([{"op": "add", "path": "/status", "value": {"ok": true}}])),
        "admit-kind" => patched(json!([{"op": "replace", "path": "/kind", "value": "Secret"}])),
        "admit-copy-bomb" => {
            let mut ops = vec![json!({"op": "add", "path": "/spec/x0", "value": "x".repeat(1000)})];
            ops.extend(
                (1..40)
                    .map(|i| json!({"op": "copy", "from": "/spec", "path": format!("/spec/x{i}")})),
            );
            AdmissionResponse {
                patch: Some(Value::Array(ops).to_string()),
                ..AdmissionResponse::allow()
            }
        }
        "admit-front-inserts" => {
            let mut ops = vec![json!({"op": "add", "path": "/spec/list", "value": []})];
            ops.extend((0..5000).map(|i| json!({"op": "add", "path": "/spec/list/0", "value": i})));
            AdmissionResponse {
                patch: Some(Value::Array(ops).to_string()),
                ..AdmissionResponse::allow()
            }
        }
        "admit-bad-patch" => AdmissionResponse {
            patch: Some("{\"op\": \"nonsense\"}".into()),
            ..AdmissionResponse::allow()
        },
        _ if review.mutating() && object["metadata"]["labels"]["hostile"].is_null() => {
            let patch = if object["metadata"]["labels"].is_object() {
                Patch::new().add("/metadata/labels/hostile", json!("admitted"))
            } else {
                Patch::new().add("/metadata/labels", json!({"hostile": "admitted"}))
            };
            patch.allow()
        }
        _ => AdmissionResponse::allow(),
    }
}

/// The hostile `convert`.
pub fn convert(mut object: Value, desired_api_version: &str) -> Result<Value, String> {
    match attack_of(&object) {
        "convert-loop" => attack::spin(),
        "convert-rename" => {
            object["metadata"]["name"] = json!("renamed");
            object["apiVersion"] = json!(desired_api_version);
            Ok(object)
        }
        "convert-stale" => Ok(object),
        "convert-host-label" => {
            object["metadata"]["labels"] = json!({"wasmop.dev/guest": "someone-else"});
            object["apiVersion"] = json!(desired_api_version);
            Ok(object)
        }
        "convert-finalizer" => {
            object["metadata"]["finalizers"] = json!(["hostile.example.com/keep"]);
            object["apiVersion"] = json!(desired_api_version);
            Ok(object)
        }
        "convert-owner" => {
            object["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Namespace",
                "name": "kube-system", "uid": "00000000-0000-0000-0000-000000000001"}]);
            object["apiVersion"] = json!(desired_api_version);
            Ok(object)
        }
        "convert-host-condition" => {
            object["status"] = json!({"conditions": [{"type": "GuestReconciled", "status": "True",
                "reason": "Forged", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]});
            object["apiVersion"] = json!(desired_api_version);
            Ok(object)
        }
        _ => {
            object["apiVersion"] = json!(desired_api_version);
            Ok(object)
        }
    }
}

/// The hostile `convert_all`: `convert-drop` answers for the whole request.
pub fn convert_all(objects: Vec<String>, desired_api_version: &str) -> Result<Vec<String>, String> {
    let values: Vec<Value> = objects
        .iter()
        .map(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    if values.iter().any(|o| attack_of(o) == "convert-drop") {
        return Ok(Vec::new());
    }
    values
        .into_iter()
        .map(|o| convert(o, desired_api_version).map(|o| o.to_string()))
        .collect()
}
