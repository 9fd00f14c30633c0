//! Attacks on the host's authority: answers that try to make the host write
//! what the parent does not own, bypass its stamps, flood the API server or
//! keep it writing without progress. Each returns normally; the host must
//! refuse it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServicePort, ServiceSpec};
use serde_json::{Value, json};
use wasmop_guest::{Event, ObjectRef, Request, Response, Result, meta};

use crate::attack::ok_config_map;

/// The data a take-over attack writes into the object it tries to take.
pub const STOLEN: &str = "taken by the hostile guest";

/// A ConfigMap named `target`: an object the parent does not own (a user's,
/// or the host's own guest list).
pub fn take_config_map(target: &str) -> Result<Response> {
    let config = ConfigMap {
        metadata: meta::object_meta(target, meta::labels([("app", "hostile")])),
        data: Some([("stolen".to_owned(), STOLEN.to_owned())].into()),
        ..ConfigMap::default()
    };
    Response::new().child(&config)
}

/// A Service named `target`.
pub fn take_service(target: &str) -> Result<Response> {
    let service = Service {
        metadata: meta::object_meta(target, meta::labels([("app", "hostile")])),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 6666,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    Response::new().child(&service)
}

/// A Secret named `target`; once taken, the host would hand its data to the
/// guest as an observed child.
pub fn take_secret(target: &str) -> Result<Response> {
    let secret = Secret {
        metadata: meta::object_meta(target, BTreeMap::new()),
        data: Some([("stolen".to_owned(), ByteString(STOLEN.as_bytes().to_vec()))].into()),
        ..Secret::default()
    };
    Response::new().child(&secret)
}

/// A Secret child of type `kubernetes.io/service-account-token` for the
/// namespace's `default` ServiceAccount: the cluster would fill it with a
/// token that acts as that ServiceAccount.
pub fn token_secret(name: &str) -> Result<Response> {
    let mut metadata = meta::object_meta(format!("{name}-token"), BTreeMap::new());
    metadata.annotations = Some(
        [(
            "kubernetes.io/service-account.name".to_owned(),
            "default".to_owned(),
        )]
        .into(),
    );
    let secret = Secret {
        metadata,
        type_: Some("kubernetes.io/service-account-token".to_owned()),
        ..Secret::default()
    };
    Response::new().child(&secret)
}

/// A child whose metadata has a shape the host's stamping does not expect:
/// `labels: null`, `annotations: []`, a field the API server owns, a key
/// that is not a label key, or a key under `wasmop.dev/`.
pub fn odd_metadata(name: &str, which: &str) -> Result<Response> {
    let metadata = match which {
        "null-labels" => json!({"name": format!("{name}-odd"), "labels": null}),
        "list-annotations" => json!({"name": format!("{name}-odd"), "annotations": []}),
        "number-label" => json!({"name": format!("{name}-odd"), "labels": {"app": 7}}),
        "bad-label-key" => json!({"name": format!("{name}-odd"), "labels": {"not a key!": "x"}}),
        "host-label" => {
            json!({"name": format!("{name}-odd"), "labels": {"wasmop.dev/owner": "me"}})
        }
        "host-annotation" => json!({"name": format!("{name}-odd"),
            "annotations": {"wasmop.dev/desired-hash": "00000000000000000000000000000000"}}),
        "server-metadata" => {
            json!({"name": format!("{name}-odd"), "finalizers": ["hostile.example.com/never"]})
        }
        other => json!({"name": format!("{name}-odd"), "generateName": other}),
    };
    let mut response = Response::new();
    response.push_child_value(&json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"odd": "true"},
    }));
    Ok(response)
}

/// `count` Events in one answer.
pub fn event_flood(name: &str, count: usize) -> Result<Response> {
    let mut response = Response::new().child(&ok_config_map(name))?;
    for i in 0..count {
        response = response.event(Event::normal("Flood", format!("event {i}")));
    }
    Ok(response)
}

/// An Event whose reason carries control characters and spaces.
pub fn bad_event_reason(name: &str) -> Result<Response> {
    Ok(Response::new()
        .child(&ok_config_map(name))?
        .event(Event::warning(
            "Bad\nReason\u{7}",
            "a reason the WIT forbids",
        )))
}

/// Two million empty children: almost nothing in JSON text, but each is a
/// string the host would have to allocate when it copies the answer out.
pub fn many_strings() -> Response {
    let mut response = Response::new();
    for _ in 0..2_000_000 {
        response = response.raw_child(String::new());
    }
    response
}

/// The ConfigMap the create/delete and flapping attacks fight over.
fn flap_name(name: &str) -> String {
    format!("{name}-flap")
}

/// Wants the ConfigMap `<name>-flap` only when it is not there: the host
/// would create it, prune it, create it again, for ever.
pub fn recreate(request: &Request, name: &str) -> Result<Response> {
    let flap = flap_name(name);
    if request.observed_named::<ConfigMap>(&flap).is_some() {
        return Response::new().status(&json!({"want": false}));
    }
    let config = ConfigMap {
        metadata: meta::object_meta(flap, BTreeMap::new()),
        data: Some([("v".to_owned(), "a".to_owned())].into()),
        ..ConfigMap::default()
    };
    Response::new()
        .child(&config)?
        .status(&json!({"want": true}))
}

/// Wants `<name>-flap` with `v: b` when it holds `a` and with `a`
/// otherwise: every apply makes the next reconcile want the other value.
pub fn flap(request: &Request, name: &str) -> Result<Response> {
    let flap = flap_name(name);
    let now = request
        .observed_named::<ConfigMap>(&flap)
        .and_then(|c| c.data)
        .and_then(|d| d.get("v").cloned());
    let next = if now.as_deref() == Some("a") {
        "b"
    } else {
        "a"
    };
    let config = ConfigMap {
        metadata: meta::object_meta(flap, BTreeMap::new()),
        data: Some([("v".to_owned(), next.to_owned())].into()),
        ..ConfigMap::default()
    };
    Response::new().child(&config)
}

/// Desires its ok ConfigMap and keeps it at the same time.
pub fn keep_and_desire(name: &str) -> Result<Response> {
    let mut response = Response::new().child(&ok_config_map(name))?;
    response.keep(ObjectRef::new("v1", "ConfigMap", format!("{name}-ok")));
    Ok(response)
}

/// A status that claims the host's own condition.
pub fn claim_host_condition(name: &str) -> Result<Response> {
    let status: Value = json!({"ok": true, "conditions": [{
        "type": "GuestReconciled", "status": "True", "reason": "Forged",
        "message": "the guest says all is well", "lastTransitionTime": "2024-01-01T00:00:00Z",
    }]});
    Response::new().child(&ok_config_map(name))?.status(&status)
}
