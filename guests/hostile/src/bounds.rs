//! Attacks on the bounds the host keeps whatever a guest answers: a
//! candidate that breaks readiness after one failure, answers that are
//! large where the host keeps them (the shadow queue, `wasmop plan`), and
//! answers that keep many children large.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Map, Value, json};
use wasmop_guest::{Error, Request, Response, Result, meta};

use crate::attack::ok_config_map;

/// Children of `bulk`.
pub const BULK_CHILDREN: usize = 20;

/// Bytes of data in each child of `bulk`: with [`BULK_CHILDREN`] of them,
/// an answer of 4 MB, within the host's default 4 MiB response limit.
pub const BULK_CHILD_BYTES: usize = 190 << 10;

/// Fields of the status `wide-status` answers.
pub const WIDE_FIELDS: usize = 40_000;

/// The well-behaved answer, whose status shows the condition `Ready` True.
pub fn ready(name: &str) -> Result<Response> {
    Response::new()
        .child(&ok_config_map(name))?
        .status(&ready_status(true, false))
}

fn ready_status(ready: bool, seen: bool) -> Value {
    let mut status = json!({"ok": true, "conditions": [{
        "type": "Ready",
        "status": if ready { "True" } else { "False" },
        "reason": if ready { "Serving" } else { "Broken" },
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]});
    if seen {
        status["candidateSeen"] = true.into();
    }
    status
}

/// A candidate whose first reconcile of each parent fails (retryable), and
/// whose every later answer shows `Ready` False: fewer failures than a
/// canary allows, then broken readiness. The parent remembers: the host's
/// own condition shows the failure, then the candidate's status marks the
/// parent as seen.
pub fn fail_once_then_unready(request: &Request, name: &str) -> Result<Response> {
    let status = request.parent().get("status");
    let seen = status
        .and_then(|s| s.get("candidateSeen"))
        .is_some_and(|v| v == true);
    let failed = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == wasmop_guest::names::HOST_CONDITION && c["status"] == "False")
        });
    if !seen && !failed {
        return Err(Error::retryable("the candidate fails its first reconcile"));
    }
    Response::new()
        .child(&ok_config_map(name))?
        .status(&ready_status(false, true))
}

/// [`BULK_CHILDREN`] ConfigMaps of [`BULK_CHILD_BYTES`] each, the same on
/// every call (converged after the first, so only the answer is large).
pub fn bulk(name: &str) -> Result<Response> {
    let data = "b".repeat(BULK_CHILD_BYTES);
    let mut response = Response::new().status(&json!({"ok": true}))?;
    for i in 0..BULK_CHILDREN {
        response = response.child(&ConfigMap {
            metadata: meta::object_meta(
                format!("{name}-bulk-{i}"),
                meta::labels([("app", "hostile")]),
            ),
            data: Some([("blob".to_owned(), data.clone())].into()),
            ..ConfigMap::default()
        })?;
    }
    Ok(response)
}

/// As [`bulk`], each ConfigMap with a data key the API server refuses
/// (`bad key`): nothing is ever created or observed, so the requests stay
/// small while every answer is 4 MB and every reconcile fails and comes
/// back.
pub fn refused_bulk(name: &str) -> Result<Response> {
    let data = "b".repeat(BULK_CHILD_BYTES);
    let mut response = Response::new().status(&json!({"ok": true}))?;
    for i in 0..BULK_CHILDREN {
        response = response.child(&ConfigMap {
            metadata: meta::object_meta(
                format!("{name}-bulk-{i}"),
                meta::labels([("app", "hostile")]),
            ),
            data: Some([("bad key".to_owned(), data.clone())].into()),
            ..ConfigMap::default()
        })?;
    }
    Ok(response)
}

/// A status of [`WIDE_FIELDS`] fields of about 80 bytes each: a change that
/// lists a field per field.
pub fn wide_status(name: &str) -> Result<Response> {
    let mut status = Map::new();
    for i in 0..WIDE_FIELDS {
        status.insert(format!("field{i:06}"), Value::String(format!("{i:075}")));
    }
    Response::new()
        .child(&ok_config_map(name))?
        .status(&Value::Object(status))
}
