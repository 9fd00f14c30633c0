//! The cache-operator in TypeScript and Python answers every reconcile
//! exactly as the Rust one does: the three built components, run by the
//! host's runtime on the same requests (new, rolling out, ready, paused,
//! invalid, deleting, and an upgrade's: rolling out, completed, rolled
//! back, held back, cancelled), give the same children, status, events,
//! kept children, requeue and finalizer answer. Transition times are compared
//! as "set now" or "kept from the parent", since each call reads the clock.

mod support;

use serde_json::{Value, json};
use wasmop_host::model::Request;
use wasmop_host::runtime::{Guest, Limits, ModuleBytes, Runtime, RuntimeConfig};

const MODULES: [&str; 3] = ["cache-operator", "cache-operator-ts", "cache-operator-py"];
/// A transition time the requests' parents carry: an answer that keeps it
/// shows it, one that sets a new time does not.
const EARLIER: &str = "2024-05-01T12:00:00Z";

fn cache(spec: Value, status: Option<Value>) -> Value {
    let mut cache = json!({
        "apiVersion": "apps.example.com/v1alpha1",
        "kind": "Cache",
        "metadata": {"name": "demo", "namespace": "default", "uid": "u-1", "generation": 2},
        "spec": spec,
    });
    if let Some(status) = status {
        cache["status"] = status;
    }
    cache
}

fn deployment(replicas: i64, hash: &str, status: Value) -> Value {
    deployment_of("redis:7.2", replicas, hash, status)
}

/// The Cache's Deployment running `image`.
fn deployment_of(image: &str, replicas: i64, hash: &str, status: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "demo", "namespace": "default", "generation": 4,
            "ownerReferences": [{"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
                "name": "demo", "uid": "u-1", "controller": true}]},
        "spec": {"replicas": replicas, "template": {
            "metadata": {"annotations": {"apps.example.com/config-hash": hash}},
            "spec": {"containers": [{"name": "cache", "image": image,
                "ports": [{"containerPort": 6379}]}]}}},
        "status": status,
    })
}

fn service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "demo", "namespace": "default",
            "ownerReferences": [{"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
                "name": "demo", "uid": "u-1", "controller": true}]}})
}

fn conditions(available: &str, progressing: &str) -> Value {
    json!([
        {"type": "Available", "status": available, "reason": "R", "message": "m",
            "lastTransitionTime": EARLIER, "observedGeneration": 1},
        {"type": "Progressing", "status": progressing, "reason": "R", "message": "m",
            "lastTransitionTime": EARLIER, "observedGeneration": 1},
    ])
}

/// `conditions(available, progressing)` and an `Upgrading` condition.
fn upgrading(status: &str, reason: &str) -> Value {
    let mut list = conditions("True", "True");
    list.as_array_mut()
        .unwrap()
        .push(json!({"type": "Upgrading", "status": status,
        "reason": reason, "message": "m", "lastTransitionTime": EARLIER, "observedGeneration": 1}));
    list
}

/// The error each invalid case ends with.
fn expected_error(case: &str) -> Option<&'static str> {
    match case {
        "invalid" => Some("spec.replicas must be between 1 and 10, got 11"),
        "invalid upgrade timeout" => {
            Some("spec.upgrade.timeoutSeconds must be between 30 and 3600, got 10")
        }
        _ => None,
    }
}

/// The cases: (name, request).
fn cases() -> Vec<(&'static str, Request)> {
    // `{"maxmemory": "64mb"}`'s config hash.
    let hash = "ea59eebecc7056b9";
    let spec = json!({"image": "redis:7.2", "replicas": 2, "config": {"maxmemory": "64mb"}});
    let ready =
        json!({"observedGeneration": 4, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2});
    let failing = json!({"image": "redis:7.4-never-ready", "replicas": 2,
        "config": {"maxmemory": "64mb"}, "upgrade": {"timeoutSeconds": 30}});
    let stuck = json!({"observedGeneration": 4, "replicas": 3, "updatedReplicas": 1,
        "readyReplicas": 2, "conditions": [{"type": "Progressing", "status": "False",
            "reason": "ProgressDeadlineExceeded", "message": "m"}]});
    let rolled_back = json!({"phase": "Degraded", "readyReplicas": 2,
        "lastGoodImage": "redis:7.2", "failedImage": "redis:7.4-never-ready",
        "conditions": upgrading("False", "RolledBack")});
    let request = |parent: Value, observed: Vec<Value>, deleting: bool| Request {
        parent,
        observed,
        deleting,
        related: vec![],
    };
    vec![
        ("new", request(cache(spec.clone(), None), vec![], false)),
        (
            "rolling out",
            request(
                cache(
                    spec.clone(),
                    Some(json!({"phase": "Pending", "conditions": conditions("False", "True")})),
                ),
                vec![deployment(
                    1,
                    "0000000000000000",
                    json!({"replicas": 1, "readyReplicas": 1}),
                )],
                false,
            ),
        ),
        (
            "ready",
            request(
                cache(
                    spec.clone(),
                    Some(json!({"phase": "Progressing", "readyReplicas": 1,
                        "conditions": conditions("True", "True")})),
                ),
                vec![deployment(2, hash, ready.clone()), service()],
                false,
            ),
        ),
        (
            "paused",
            request(
                cache(
                    json!({"image": "redis:7.4", "replicas": 3, "paused": true}),
                    Some(json!({"phase": "Ready", "conditions": conditions("True", "False")})),
                ),
                vec![deployment(2, hash, ready.clone()), service()],
                false,
            ),
        ),
        (
            "deleting with pods",
            request(
                cache(spec.clone(), None),
                vec![deployment(2, hash, ready.clone()), service()],
                true,
            ),
        ),
        (
            "deleting, pods gone",
            request(
                cache(spec.clone(), None),
                vec![deployment(0, hash, json!({"replicas": 0})), service()],
                true,
            ),
        ),
        (
            "invalid",
            request(
                cache(json!({"image": "redis", "replicas": 11}), None),
                vec![],
                false,
            ),
        ),
        (
            "invalid upgrade timeout",
            request(
                cache(
                    json!({"image": "redis:7.2", "upgrade": {"timeoutSeconds": 10}}),
                    None,
                ),
                vec![],
                false,
            ),
        ),
        (
            "upgrade rolling out",
            request(
                cache(
                    with_image(&spec, "redis:7.4"),
                    Some(json!({"phase": "Ready", "readyReplicas": 2,
                        "lastGoodImage": "redis:7.2", "conditions": conditions("True", "False")})),
                ),
                vec![deployment(2, hash, ready.clone()), service()],
                false,
            ),
        ),
        (
            "upgrade completed",
            request(
                cache(
                    with_image(&spec, "redis:7.4"),
                    Some(json!({"phase": "Ready", "readyReplicas": 2,
                        "lastGoodImage": "redis:7.2", "conditions": upgrading("True", "RollingOut")})),
                ),
                vec![
                    deployment_of("redis:7.4", 2, hash, ready.clone()),
                    service(),
                ],
                false,
            ),
        ),
        (
            "upgrade past its deadline",
            request(
                cache(
                    failing.clone(),
                    Some(json!({"phase": "Ready", "readyReplicas": 2,
                        "lastGoodImage": "redis:7.2", "conditions": upgrading("True", "RollingOut")})),
                ),
                vec![
                    deployment_of("redis:7.4-never-ready", 2, hash, stuck),
                    service(),
                ],
                false,
            ),
        ),
        (
            "rolled back",
            request(
                cache(failing.clone(), Some(rolled_back.clone())),
                vec![deployment(2, hash, ready.clone()), service()],
                false,
            ),
        ),
        (
            "deleting, rolled back",
            request(
                cache(failing, Some(rolled_back)),
                vec![deployment(2, hash, ready.clone()), service()],
                true,
            ),
        ),
        (
            "back to the last good image",
            request(
                cache(
                    spec.clone(),
                    Some(json!({"phase": "Ready", "readyReplicas": 2,
                        "lastGoodImage": "redis:7.2", "conditions": upgrading("True", "RollingOut")})),
                ),
                vec![deployment(2, hash, ready), service()],
                false,
            ),
        ),
    ]
}

/// `spec` with `image`.
fn with_image(spec: &Value, image: &str) -> Value {
    let mut spec = spec.clone();
    spec["image"] = json!(image);
    spec
}

/// The built module `stem`.
fn module(stem: &str) -> ModuleBytes {
    ModuleBytes::new(std::fs::read(support::guest_module(stem).unwrap()).unwrap())
}

/// The answer as comparable JSON: children and status parsed, transition
/// times other than [`EARLIER`] replaced by "now"; an error as its kind and
/// message.
fn answer(guest: &Guest, request: &Request) -> Value {
    match guest.reconcile(request) {
        Ok(response) => {
            let mut status: Option<Value> = response
                .status
                .as_deref()
                .map(|s| serde_json::from_str(s).unwrap());
            if let Some(list) = status
                .as_mut()
                .and_then(|s| s.get_mut("conditions"))
                .and_then(Value::as_array_mut)
            {
                for condition in list {
                    if condition["lastTransitionTime"] != EARLIER {
                        condition["lastTransitionTime"] = json!("now");
                    }
                }
            }
            let children: Vec<Value> = response
                .children
                .iter()
                .map(|c| serde_json::from_str(c).unwrap())
                .collect();
            json!({
                "children": children,
                "status": status,
                "requeueAfterSeconds": response.requeue_after_seconds,
                "finalized": response.finalized,
                "events": serde_json::to_value(&response.events).unwrap(),
                "keep": serde_json::to_value(&response.keep).unwrap(),
            })
        }
        Err(e) => json!({"error": e.to_string()}),
    }
}

#[test]
fn the_typescript_and_python_cache_operators_answer_as_the_rust_one_does() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guests: Vec<Guest> = MODULES
        .iter()
        .map(|stem| {
            runtime
                .load(stem, &module(stem), Limits::default(), None)
                .unwrap()
                .0
        })
        .collect();
    for (case, request) in cases() {
        let rust = answer(&guests[0], &request);
        assert!(
            rust.get("error").is_some() == expected_error(case).is_some(),
            "{case}: the Rust guest answered {rust:#}"
        );
        // What each case is about, so that agreeing on nothing cannot pass.
        let image = rust["children"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["kind"] == "Deployment"))
            .map(|d| d["spec"]["template"]["spec"]["containers"][0]["image"].clone());
        let reasons: Vec<&str> = rust["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["reason"].as_str())
            .collect();
        let upgrading = rust["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Upgrading"))
            .map(|c| (c["status"].clone(), c["reason"].clone()));
        let shape = match case {
            "new" | "rolling out" | "ready" => rust["children"].as_array().map(Vec::len) == Some(3),
            "paused" => rust["keep"].as_array().map(Vec::len) == Some(2),
            "deleting with pods" => {
                rust["requeueAfterSeconds"] == json!(2) && rust["finalized"] == json!(false)
            }
            "deleting, pods gone" => rust["finalized"] == json!(true),
            "upgrade rolling out" => {
                rust["status"]["phase"] == "Ready"
                    && upgrading == Some((json!("True"), json!("RollingOut")))
                    && image == Some(json!("redis:7.4"))
            }
            "upgrade completed" => {
                reasons == ["Upgraded"] && rust["status"]["lastGoodImage"] == "redis:7.4"
            }
            "upgrade past its deadline" => {
                reasons.contains(&"UpgradeRolledBack")
                    && rust["status"]["phase"] == "Degraded"
                    && image == Some(json!("redis:7.2"))
            }
            "rolled back" => {
                reasons.is_empty()
                    && rust["status"]["phase"] == "Degraded"
                    && image == Some(json!("redis:7.2"))
            }
            "deleting, rolled back" => image == Some(json!("redis:7.2")),
            "back to the last good image" => {
                upgrading == Some((json!("False"), json!("Cancelled")))
            }
            _ => true,
        };
        assert!(shape, "{case}: the Rust guest answered {rust:#}");
        if case == "ready" {
            assert_eq!(rust["status"]["phase"], "Ready", "{rust:#}");
        }
        for (stem, guest) in MODULES.iter().zip(&guests).skip(1) {
            let other = answer(guest, &request);
            let other = match (rust.get("error"), other.get("error")) {
                // Each SDK words the trap-free guest error its own way
                // around the guest's message; the message is the same.
                (Some(want), Some(got)) => {
                    let want = want.as_str().unwrap();
                    let got = got.as_str().unwrap();
                    let message = expected_error(case).unwrap();
                    assert!(
                        want.ends_with(message)
                            && got.ends_with(message)
                            && want.contains("permanent")
                            && got.contains("permanent"),
                        "{case}: {stem} failed as {got:?}, the Rust guest as {want:?}"
                    );
                    continue;
                }
                _ => other,
            };
            assert_eq!(
                other, rust,
                "{case}: {stem} answers differently from the Rust guest"
            );
        }
    }
}

/// A guest's `memoryLimit` holds for these engines too: the TypeScript and
/// Python components need megabytes of memory before any reconcile code
/// runs, and under a cap smaller than that every call fails as
/// `GuestMemoryLimit`, named, instead of trapping some other way.
#[test]
fn the_memory_limit_applies_to_typescript_and_python_guests() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let (_, request) = cases().remove(0);
    for stem in &MODULES[1..] {
        let limits = Limits {
            memory_bytes: 4 << 20,
            ..Limits::default()
        };
        match runtime.load(stem, &module(stem), limits, None) {
            // `describe` already ran out of memory: refused at load, named.
            Err(e) => {
                eprintln!("{stem} under 4 MiB: refused at load: {e}");
                assert!(e.to_string().contains("memory"), "{stem}: {e}");
            }
            Ok((guest, _)) => {
                let err = guest.reconcile(&request).unwrap_err();
                eprintln!("{stem} under 4 MiB: the reconcile failed: {err}");
                assert_eq!(err.reason().as_str(), "GuestMemoryLimit", "{stem}: {err}");
            }
        }
    }
}
