//! The deletion path: scale the Deployment to zero and wait for its pods to
//! go before letting the host remove the finalizer.
//!
//! The seeds' point about finalizers is that cleanup must be real and
//! finished before the finalizer goes. Here the cleanup is visible: Events on
//! the Cache, the Deployment scaling down, and the Cache staying in
//! Terminating until the last pod has stopped.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::Value;
use wasmop_guest::{Event, Request, Response, Result};

use crate::flavor::Flavor;
use crate::keep::{as_observed, kept_children};

/// The finalizer the operator declares; the host adds it to every Cache.
pub const FINALIZER: &str = "apps.example.com/cache-cleanup";

/// How often to look again while pods are stopping. Pods stop within their
/// grace period (30 s by default); polling every 2 s keeps deletion snappy
/// without loading the API server (children changing also wakes the host).
pub const POLL_SECONDS: u32 = 2;

/// The answer for a Cache with a deletionTimestamp: every observed child kept
/// as it is, except the Deployment, scaled to zero; `finalized` once the
/// Deployment reports no pods (or there is none).
pub fn reconcile_deletion(request: &Request, name: &str, flavor: Flavor) -> Result<Response> {
    let deployment = request.observed_raw_named::<Deployment>(name);
    let mut response = Response::new();
    for child in kept_children(request.observed(), flavor) {
        let mut kept = as_observed(child);
        if deployment.is_some_and(|d| std::ptr::eq(d, child))
            && let Some(spec) = kept.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.insert("replicas".to_owned(), Value::from(0));
        }
        response.push_child_value(&kept);
    }

    let Some(deployment) = deployment else {
        return Ok(response.finalize().event(Event::normal(
            "CleanupComplete",
            format!("no Deployment {name} left; the Cache can go"),
        )));
    };
    let pods = count(deployment, "/status/replicas");
    if pods == 0 {
        return Ok(response.finalize().event(Event::normal(
            "CleanupComplete",
            format!("all pods of Deployment {name} have stopped; the Cache can go"),
        )));
    }
    let wanted = count(deployment, "/spec/replicas");
    let event = if wanted == 0 {
        Event::normal(
            "CleanupWaiting",
            format!("waiting for {pods} pod(s) of Deployment {name} to stop"),
        )
    } else {
        Event::normal(
            "CleanupStarted",
            format!("scaling Deployment {name} from {wanted} to 0 replicas before deletion"),
        )
    };
    Ok(response.requeue_after(POLL_SECONDS).event(event))
}

fn count(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}
