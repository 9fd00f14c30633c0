//! One reconcile of a Metacontroller controller: the request its sync (or
//! finalize) hook gets, and its answer turned into the host's writes.
//!
//! The request is Metacontroller's: `controller` (the definition),
//! `parent`, `children` keyed `<Kind>.<apiVersion>` and then by name (by
//! `namespace/name` under a cluster-scoped parent), `related` (empty: no
//! `customize` hook) and `finalizing`. The answer's `children` are the
//! children that should exist; what the request had and the answer omits
//! is deleted. What happens to a child that exists and differs from the
//! answer is its child resource's update strategy, which the host's plan
//! applies (`controller/reconcile/plan.rs`), where it knows whether a child
//! differs from what was last applied.

use serde_json::{Map, Value, json};

use super::definition::{Controller, api_version};
use crate::model::{ReconcileRequest, ReconcileResponse};

/// The hook to call and the body to send it.
#[derive(Debug)]
pub struct HookCall {
    /// The hook's path in the hooks folder (`sync` for `sync.js`).
    pub route: String,
    /// Which hook it is, for messages: "sync" or "finalize".
    pub hook: &'static str,
    /// The JSON body Metacontroller would POST.
    pub body: String,
}

/// The hook call for `wire`: the finalize hook while the parent is being
/// deleted (and the definition has one), else the sync hook.
pub fn request(controller: &Controller, wire: &ReconcileRequest) -> Result<HookCall, String> {
    let parent: Value =
        serde_json::from_str(&wire.parent).map_err(|e| format!("the parent is not JSON: {e}"))?;
    let mut children = Map::new();
    for child in &controller.children {
        children.insert(child.children_key(), Value::Object(Map::new()));
    }
    let across = !controller.parent.namespaced;
    for observed in &wire.observed {
        let Some(index) = child_index(controller, &observed.api_version, &observed.kind) else {
            continue;
        };
        let object: Value = serde_json::from_str(&observed.object)
            .map_err(|e| format!("an observed child is not JSON: {e}"))?;
        let key = match object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            Some(namespace) if across => format!("{namespace}/{}", observed.name),
            _ => observed.name.clone(),
        };
        if let Some(Value::Object(by_name)) =
            children.get_mut(&controller.children[index].children_key())
        {
            by_name.insert(key, object);
        }
    }
    let finalizing = wire.deleting && controller.composite.hooks.finalize.is_some();
    let (route, hook) = match (&controller.composite.hooks.finalize, finalizing) {
        (Some(route), true) => (route.clone(), "finalize"),
        _ => (controller.composite.hooks.sync.clone(), "sync"),
    };
    let body = json!({
        "controller": controller.composite.object,
        "parent": parent,
        "children": children,
        "related": {},
        "finalizing": finalizing,
    });
    Ok(HookCall {
        route,
        hook,
        body: body.to_string(),
    })
}

fn child_index(controller: &Controller, api: &str, kind: &str) -> Option<usize> {
    controller
        .children
        .iter()
        .position(|c| c.kind == kind && api_version(&c.group, &c.version) == api)
}

/// The host's writes for the hook's `answer` to `wire`.
pub fn response(
    controller: &Controller,
    wire: &ReconcileRequest,
    hook: &str,
    answer: &str,
) -> Result<ReconcileResponse, String> {
    let answer: Value = serde_json::from_str(answer)
        .map_err(|e| format!("the {hook} hook's answer is not JSON: {e}"))?;
    let Value::Object(answer) = answer else {
        return Err(format!("the {hook} hook's answer is not a JSON object"));
    };
    let mut response = ReconcileResponse::default();
    match answer.get("status") {
        None | Some(Value::Null) => {}
        Some(status @ Value::Object(_)) => response.status = Some(status.to_string()),
        Some(_) => return Err(format!("the {hook} hook's `status` is not an object")),
    }
    response.requeue_after_seconds = match answer.get("resyncAfterSeconds") {
        None | Some(Value::Null) => controller.composite.resync_seconds,
        Some(v) => match v.as_f64() {
            Some(s) if s > 0.0 => Some(s.ceil().min(f64::from(u32::MAX)) as u32),
            Some(_) => controller.composite.resync_seconds,
            None => {
                return Err(format!(
                    "the {hook} hook's `resyncAfterSeconds` is not a number"
                ));
            }
        },
    };
    if wire.deleting {
        response.finalized = match answer.get("finalized") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(done)) => *done,
            Some(_) => {
                return Err(format!(
                    "the {hook} hook's `finalized` is not true or false"
                ));
            }
        };
    }
    let desired = match answer.get("children") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(children)) => children.clone(),
        Some(_) => return Err(format!("the {hook} hook's `children` is not a list")),
    };
    for child in desired {
        let api = child
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = child.get("kind").and_then(Value::as_str).unwrap_or("");
        if child_index(controller, api, kind).is_none() {
            let name = child
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(format!(
                "the {hook} hook answered a child {kind:?} of {api:?} ({name:?}), which the definition's childResources do not list"
            ));
        }
        response.children.push(child.to_string());
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metacontroller::definition::{Embedded, Resolved};
    use crate::model::ObservedObject;

    fn controller(method: &str, finalize: bool) -> Controller {
        let finalize = if finalize {
            "\n    finalize:\n      webhook:\n        url: http://h/finalize"
        } else {
            ""
        };
        let yaml = format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: CompositeController\nmetadata:\n  name: pets\nspec:\n  resyncPeriodSeconds: 30\n  parentResource:\n    apiVersion: example.com/v1\n    resource: pets\n  childResources:\n  - apiVersion: v1\n    resource: pods\n    updateStrategy:\n      method: {method}\n      statusChecks:\n        conditions:\n        - type: Ready\n          status: \"True\"\n  hooks:\n    sync:\n      webhook:\n        url: http://h/sync{finalize}\n"
        );
        let embedded = Embedded {
            definition: crate::metacontroller::definition::pick(&yaml, None).unwrap(),
            kinds: vec![
                Resolved {
                    group: "example.com".into(),
                    version: "v1".into(),
                    kind: "Pet".into(),
                    namespaced: true,
                },
                Resolved {
                    group: "".into(),
                    version: "v1".into(),
                    kind: "Pod".into(),
                    namespaced: true,
                },
            ],
        };
        Controller::from_embedded(&serde_json::to_string(&embedded).unwrap()).unwrap()
    }

    fn pod(name: &str, image: &str, ready: bool) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": {"wasmop.dev/guest": "pets"}},
            "spec": {"containers": [{"name": "c", "image": image, "terminationMessagePath": "/dev/termination-log"}]},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        })
    }

    fn want(name: &str, image: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    fn wire(observed: &[Value], deleting: bool) -> ReconcileRequest {
        ReconcileRequest {
            parent: json!({"apiVersion": "example.com/v1", "kind": "Pet", "metadata": {"name": "p", "namespace": "ns"}}).to_string(),
            observed: observed
                .iter()
                .map(|o| ObservedObject {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: o["metadata"]["name"].as_str().unwrap().into(),
                    object: o.to_string(),
                })
                .collect(),
            deleting,
            ..ReconcileRequest::default()
        }
    }

    fn answer(children: &[Value]) -> String {
        json!({"status": {"replicas": children.len()}, "children": children}).to_string()
    }

    fn names(response: &ReconcileResponse) -> (Vec<String>, Vec<String>) {
        let written = response
            .children
            .iter()
            .map(|c| {
                serde_json::from_str::<Value>(c).unwrap()["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let kept = response.keep.iter().map(|k| k.name.clone()).collect();
        (written, kept)
    }

    #[test]
    fn the_request_keys_children_by_kind_and_api_version_then_name() {
        let c = controller("OnDelete", false);
        let call = request(&c, &wire(&[pod("a", "v1", true)], false)).unwrap();
        assert_eq!(call.route, "sync");
        let body: Value = serde_json::from_str(&call.body).unwrap();
        assert_eq!(
            body["children"]["Pod.v1"]["a"]["spec"]["containers"][0]["image"],
            "v1"
        );
        assert_eq!(body["controller"]["metadata"]["name"], "pets");
        assert_eq!(body["finalizing"], false);
        assert_eq!(body["related"], json!({}));
    }

    #[test]
    fn a_deleted_parent_calls_the_finalize_hook_and_passes_finalized_on() {
        let c = controller("OnDelete", true);
        let call = request(&c, &wire(&[], true)).unwrap();
        assert_eq!((call.route.as_str(), call.hook), ("finalize", "finalize"));
        let r = response(&c, &wire(&[], true), "finalize", r#"{"finalized": true}"#).unwrap();
        assert!(r.finalized);
        assert_eq!(
            c.finalizer().as_deref(),
            Some("metacontroller.io/compositecontroller-pets")
        );
        assert_eq!(controller("OnDelete", false).finalizer(), None);
    }

    #[test]
    fn the_answer_names_every_desired_child_status_and_resync() {
        let c = controller("RollingRecreate", false);
        let observed = [pod("a", "v1", true)];
        let desired = [want("a", "v2"), want("b", "v2")];
        let r = response(&c, &wire(&observed, false), "sync", &answer(&desired)).unwrap();
        let (written, kept) = names(&r);
        assert_eq!(written, ["a", "b"]);
        assert!(kept.is_empty());
        assert_eq!(r.status.as_deref(), Some(r#"{"replicas":2}"#));
        assert_eq!(r.requeue_after_seconds, Some(30));
        assert!(!r.finalized, "finalized is read on the deletion path only");
    }

    #[test]
    fn a_bad_answer_is_the_hooks_failure_in_words() {
        let c = controller("OnDelete", false);
        let w = wire(&[], false);
        for (answer, says) in [
            ("not json", "not JSON"),
            ("[]", "not a JSON object"),
            (r#"{"children": {}}"#, "`children` is not a list"),
            (r#"{"status": "up"}"#, "`status` is not an object"),
            (
                r#"{"children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]}"#,
                "do not list",
            ),
        ] {
            let err = response(&c, &w, "sync", answer).unwrap_err();
            assert!(err.contains(says), "{answer}: {err}");
        }
    }
}
