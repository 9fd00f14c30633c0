//! The PetSet controller of `guests/metacontroller/petset` as a Rust wasmop
//! guest: the logic of its hook (`hooks/sync.js`) and of the update
//! strategy its definition names (`RollingRecreate` with the Ready check),
//! which for a hook guest the host applies, here in the guest. So `cargo
//! xtask bench metacontroller` compares the hooks with the same work done
//! by a guest written for wasmop.
//!
//! A PetSet (`mc.example.com/v1`) keeps `spec.replicas` Pods named
//! `<name>-0`, `<name>-1`, …, created in order, each once the ones before
//! it are Ready. A Pod whose template differs from the PetSet's (the
//! annotation `mc.example.com/template` holds the template's hash) is
//! deleted, one at a time, once every Pod exists and the others are Ready;
//! the next reconcile creates it anew. Scaling down removes the highest
//! ordinals. While the PetSet is deleted its finalizer (Metacontroller's
//! name, as the hook guest's) stays until the Pods are gone, removed from
//! the highest ordinal down, one per reconcile. The status counts the Pods
//! and the Ready ones.

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use wasmop_guest::{
    ChildKind, Description, KindRef, ObjectRef, Operator, Request, Response, Result, Settings,
};

/// The finalizer, Metacontroller's name for the PetSet's controller.
pub const FINALIZER: &str = "metacontroller.io/compositecontroller-petset-controller";

/// The annotation that carries the hash of the template a Pod was made
/// from.
const TEMPLATE: &str = "mc.example.com/template";

/// The PetSet controller.
#[derive(Debug, Clone, Copy, Default)]
pub struct PetSet;

fn ready(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
}

fn template_hash(template: &Value) -> String {
    let mut h = DefaultHasher::new();
    template.to_string().hash(&mut h);
    format!("{:016x}", h.finish())
}

fn pod_for(set: &str, ordinal: u64, template: &Value, hash: &str) -> Value {
    let mut labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    labels["mc.example.com/petset"] = json!(set);
    labels["mc.example.com/ordinal"] = json!(ordinal.to_string());
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{set}-{ordinal}"),
            "labels": labels,
            "annotations": {TEMPLATE: hash},
        },
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

impl Operator for PetSet {
    fn describe(_: &Settings) -> std::result::Result<Description, String> {
        Ok(
            Description::new(KindRef::new("mc.example.com", "v1", "PetSet"))
                .child(ChildKind::of::<Pod>())
                .finalizer(FINALIZER),
        )
    }

    fn reconcile(request: Request) -> Result<Response> {
        let set = request.parent_name().to_owned();
        let spec = request.parent().get("spec").cloned().unwrap_or_default();
        let template = spec.get("template").cloned().unwrap_or_else(|| json!({}));
        let hash = template_hash(&template);
        let pods: Vec<&Value> = request.observed_raw_of::<Pod>().collect();
        let named = |ordinal: u64| {
            let name = format!("{set}-{ordinal}");
            pods.iter().copied().find(|p| p["metadata"]["name"] == name)
        };
        let status = json!({
            "replicas": pods.len(),
            "readyReplicas": pods.iter().filter(|p| ready(p)).count(),
        });
        let mut response = Response::new();
        let ordinal_of = |pod: &Value| {
            pod["metadata"]["name"]
                .as_str()
                .and_then(|n| n.strip_prefix(&format!("{set}-")))
                .and_then(|n| n.parse::<u64>().ok())
        };
        if request.deleting {
            let mut ordinals: Vec<u64> = pods.iter().filter_map(|p| ordinal_of(p)).collect();
            ordinals.sort_unstable();
            ordinals.pop();
            for ordinal in ordinals {
                response.keep(pod_ref(&format!("{set}-{ordinal}")));
            }
            response.set_status(&status)?;
            return Ok(if pods.is_empty() {
                response.finalize()
            } else {
                response
            });
        }
        let replicas = spec.get("replicas").and_then(Value::as_u64).unwrap_or(1);
        let all_ready = (0..replicas).all(|o| named(o).is_some_and(ready));
        let mut previous_ready = true;
        let mut creating = false;
        let mut replacing = false;
        for ordinal in 0..replicas {
            match named(ordinal) {
                Some(pod) => {
                    let stale = pod
                        .pointer("/metadata/annotations")
                        .and_then(|a| a.get(TEMPLATE))
                        != Some(&json!(hash));
                    if stale && all_ready && !replacing {
                        // Deleted (left out); created anew next time.
                        replacing = true;
                    } else if stale {
                        response.keep(pod_ref(&format!("{set}-{ordinal}")));
                    } else {
                        response.push_child_value(&pod_for(&set, ordinal, &template, &hash));
                    }
                    previous_ready = previous_ready && ready(pod);
                }
                None => {
                    if previous_ready && !creating {
                        response.push_child_value(&pod_for(&set, ordinal, &template, &hash));
                        creating = true;
                    }
                    previous_ready = false;
                }
            }
        }
        response.set_status(&status)?;
        Ok(response)
    }
}

/// The Pod `name`, as the answer keeps it.
fn pod_ref(name: &str) -> ObjectRef {
    ObjectRef::new("v1", "Pod", name)
}

wasmop_guest::export_operator!(PetSet);

#[cfg(test)]
mod tests {
    use super::*;

    fn petset(replicas: u64, image: &str) -> Value {
        json!({"apiVersion": "mc.example.com/v1", "kind": "PetSet",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u"},
            "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]}}}})
    }

    fn pod(ordinal: u64, image: &str, is_ready: bool) -> Value {
        let set = petset(1, image);
        let mut pod = pod_for(
            "web",
            ordinal,
            &set["spec"]["template"],
            &template_hash(&set["spec"]["template"]),
        );
        pod["status"] = json!({"conditions": [{"type": "Ready", "status": if is_ready { "True" } else { "False" }}]});
        pod
    }

    /// The Pods the answer wants and those it keeps as they are.
    fn names(response: &Response) -> Vec<String> {
        let mut names: Vec<String> = response
            .child_values()
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
            .chain(response.kept().iter().map(|k| k.name.clone()))
            .collect();
        names.sort();
        names
    }

    fn reconcile(parent: Value, observed: Vec<Value>, deleting: bool) -> Response {
        PetSet::reconcile(Request::new(parent, observed, deleting)).unwrap()
    }

    #[test]
    fn pods_are_created_in_order_each_after_the_ones_before_are_ready() {
        assert_eq!(names(&reconcile(petset(3, "a"), vec![], false)), ["web-0"]);
        let waiting = reconcile(petset(3, "a"), vec![pod(0, "a", false)], false);
        assert_eq!(names(&waiting), ["web-0"]);
        let next = reconcile(petset(3, "a"), vec![pod(0, "a", true)], false);
        assert_eq!(names(&next), ["web-0", "web-1"]);
        assert_eq!(next.status_value().unwrap()["readyReplicas"], 1);
    }

    #[test]
    fn a_new_template_replaces_one_pod_at_a_time_once_all_are_ready() {
        let ready = vec![pod(0, "a", true), pod(1, "a", true)];
        let rolling = reconcile(petset(2, "b"), ready, false);
        assert_eq!(names(&rolling), ["web-1"], "web-0 is deleted first");
        let one_new = vec![pod(0, "b", false), pod(1, "a", true)];
        let held = reconcile(petset(2, "b"), one_new, false);
        assert_eq!(names(&held), ["web-0", "web-1"], "web-1 waits for web-0");
    }

    #[test]
    fn scaling_down_and_finalizing_remove_the_highest_ordinals() {
        let pods = vec![pod(0, "a", true), pod(1, "a", true)];
        assert_eq!(
            names(&reconcile(petset(1, "a"), pods.clone(), false)),
            ["web-0"]
        );
        let finalizing = reconcile(petset(2, "a"), pods, true);
        assert_eq!(names(&finalizing), ["web-0"]);
        assert!(!finalizing.finalized);
        assert!(reconcile(petset(2, "a"), vec![], true).finalized);
    }
}
