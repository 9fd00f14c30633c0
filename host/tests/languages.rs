//! The cache-operator in TypeScript and Python answers every reconcile,
//! admission and conversion exactly as the Rust one does: the three built
//! components, run by the host's runtime on the same requests (new, rolling
//! out, ready, paused, invalid, deleting, an upgrade's: rolling out,
//! completed, rolled back, held back, cancelled; `spec.auth`'s Secret
//! missing and found; a `v1beta1` parent), give the same children, status,
//! events, kept children, requeue and finalizer answer; the same verdicts
//! and patches through the host's admission checks (`render --admission`'s
//! path); the same conversions or errors through its conversion checks; and
//! their registry builds the same registration answers. Transition times are
//! compared as "set now" or "kept from the parent", since each call reads
//! the clock.
//!
//! The host refuses a TypeScript or Python guest's bad verdicts and
//! conversions (the hostile guest's attacks, past the SDKs' own checks)
//! exactly as it refuses the Rust hostile guest's, and both SDKs' build
//! scripts refuse a WIT of another contract version.

mod support;

use serde_json::{Value, json};
use wasmop_host::model::Request;
use wasmop_host::runtime::{Guest, Limits, ModuleBytes, Runtime, RuntimeConfig};
use wasmop_host::webhook::offline;

const MODULES: [&str; 3] = ["cache-operator", "cache-operator-ts", "cache-operator-py"];
/// The builds that import `wasi:http` for their `registryUrl`.
const REGISTRY_MODULES: [&str; 3] = [
    "cache-operator-registry",
    "cache-operator-ts-registry",
    "cache-operator-py-registry",
];
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
        "invalid password key" => Some("spec.auth.secretRef.key \"a/b\" is not a valid Secret key"),
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
            "password Secret missing",
            request(
                cache(
                    json!({"image": "redis:7.2", "auth": {"secretRef": {"name": "creds", "key": "password"}}}),
                    Some(json!({"phase": "Ready", "conditions": conditions("True", "False")})),
                ),
                vec![deployment(2, hash, ready.clone()), service()],
                false,
            ),
        ),
        (
            "password Secret found",
            Request {
                parent: cache(
                    json!({"image": "redis:7.2", "replicas": 2, "config": {"maxmemory": "64mb"},
                        "auth": {"secretRef": {"name": "creds", "key": "password"}}}),
                    None,
                ),
                observed: vec![deployment(2, hash, ready.clone()), service()],
                deleting: false,
                related: vec![json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "creds", "namespace": "default"},
                    "data": {"password": "c2hhMjU2OmFiYw=="}})],
            },
        ),
        (
            "invalid password key",
            request(
                cache(
                    json!({"image": "redis:7.2", "auth": {"secretRef": {"name": "creds", "key": "a/b"}}}),
                    None,
                ),
                vec![],
                false,
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

/// The three modules `stems` loaded with `settings`.
fn load(runtime: &Runtime, stems: &[&str], settings: Option<&str>) -> Vec<Guest> {
    stems
        .iter()
        .map(|stem| {
            runtime
                .load(
                    stem,
                    &module(stem),
                    Limits::default(),
                    settings.map(str::to_owned),
                )
                .unwrap_or_else(|e| panic!("{stem}: {e:#}"))
                .0
        })
        .collect()
}

#[test]
fn the_typescript_and_python_cache_operators_answer_as_the_rust_one_does() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guests = load(&runtime, &MODULES, None);
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
            "password Secret missing" => {
                reasons.contains(&"SecretMissing")
                    && rust["keep"].as_array().map(Vec::len) == Some(2)
            }
            "password Secret found" => {
                reasons.contains(&"SecretChanged")
                    && rust["children"][1]["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"]
                        == "CACHE_PASSWORD"
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

/// An `admission.k8s.io/v1` AdmissionReview of `operation` on `object`.
fn admission_review(operation: &str, object: &Value) -> Value {
    let version = object["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map_or("v1alpha1", |(_, v)| v);
    let mut request = json!({
        "uid": "0d0b4e61-0000-4000-8000-000000000001",
        "kind": {"group": "apps.example.com", "version": version, "kind": "Cache"},
        "resource": {"group": "apps.example.com", "version": version, "resource": "caches"},
        "name": "demo", "namespace": "default", "operation": operation,
        "userInfo": {"username": "someone"}, "dryRun": false,
    });
    if operation == "DELETE" {
        request["oldObject"] = object.clone();
    } else {
        request["object"] = object.clone();
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// A Cache in `version` with `spec`.
fn cache_in(version: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("apps.example.com/{version}"), "kind": "Cache",
        "metadata": {"name": "demo", "namespace": "default", "uid": "u-1"}, "spec": spec})
}

/// The admission cases: (name, settings, operation, object, what the Rust
/// guest's answer must show).
fn admission_cases() -> Vec<(
    &'static str,
    Option<&'static str>,
    &'static str,
    Value,
    &'static str,
)> {
    vec![
        (
            "defaults the eviction policy",
            None,
            "CREATE",
            cache_in("v1alpha1", json!({"image": "redis:7.2"})),
            "/spec/config",
        ),
        (
            "adds the policy beside other keys",
            None,
            "CREATE",
            cache_in(
                "v1alpha1",
                json!({"image": "redis:7.2", "config": {"maxmemory": "64mb"}}),
            ),
            "/spec/config/maxmemory-policy",
        ),
        (
            "appends the policy to a v1beta1 list",
            None,
            "UPDATE",
            cache_in(
                "v1beta1",
                json!({"image": "redis:7.2", "config": [{"name": "maxmemory", "value": "1mb"}]}),
            ),
            "/spec/config/-",
        ),
        (
            "defaults a v1beta1 config",
            None,
            "CREATE",
            cache_in("v1beta1", json!({"image": "redis:7.2"})),
            "/spec/config",
        ),
        (
            "keeps a whole config file",
            None,
            "CREATE",
            cache_in(
                "v1alpha1",
                json!({"image": "redis@sha256:abc", "config": {"redis.conf": "x"}}),
            ),
            "allowed",
        ),
        (
            "refuses an untagged image",
            None,
            "CREATE",
            cache_in("v1alpha1", json!({"image": "redis"})),
            "has no tag",
        ),
        (
            "refuses latest",
            None,
            "CREATE",
            cache_in("v1alpha1", json!({"image": "localhost:5000/redis:latest"})),
            "latest",
        ),
        (
            "refuses an empty tag",
            None,
            "CREATE",
            cache_in("v1alpha1", json!({"image": "redis:"})),
            "empty tag",
        ),
        (
            "names the first unknown directive",
            None,
            "CREATE",
            cache_in(
                "v1alpha1",
                json!({"image": "redis:7.2", "config": {"zz-unknown": "1", "aa-unknown": "1"}}),
            ),
            "aa-unknown",
        ),
        (
            "refuses a Cache without a spec",
            None,
            "CREATE",
            json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache", "metadata": {"name": "demo"}}),
            "no spec",
        ),
        (
            "refuses a v1beta1 spec of the wrong shape",
            None,
            "CREATE",
            cache_in(
                "v1beta1",
                json!({"image": "redis:7.2", "ports": {"client": 1, "admin": 2}}),
            ),
            "ports.admin",
        ),
        (
            "lets a delete through",
            None,
            "DELETE",
            cache_in("v1alpha1", json!({"image": "redis"})),
            "allowed",
        ),
        (
            "defaults the image from the settings",
            Some(r#"{"defaultImage": "redis:7.4"}"#),
            "CREATE",
            cache_in(
                "v1alpha1",
                json!({"config": {"maxmemory-policy": "noeviction"}}),
            ),
            "/spec/image",
        ),
    ]
}

#[test]
fn the_three_cache_operators_admit_alike_through_the_hosts_checks() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let plain = load(&runtime, &MODULES, None);
    let defaulting = load(&runtime, &MODULES, Some(r#"{"defaultImage": "redis:7.4"}"#));
    for (case, settings, operation, object, shows) in admission_cases() {
        let guests = if settings.is_some() {
            &defaulting
        } else {
            &plain
        };
        let review = admission_review(operation, &object);
        let answers: Vec<Value> = guests
            .iter()
            .map(|guest| match offline::admit(guest, review.clone()) {
                Ok(admitted) => serde_json::to_value(admitted).unwrap(),
                Err(e) => json!({"error": format!("{e:#}")}),
            })
            .collect();
        let rust = &answers[0];
        let text = rust.to_string();
        let shown = if shows == "allowed" {
            rust["mutating"]["allowed"] == true && rust["validating"]["allowed"] == true
        } else {
            text.contains(shows)
        };
        assert!(shown, "{case}: the Rust guest answered {rust:#}");
        for (stem, other) in MODULES.iter().zip(&answers).skip(1) {
            assert_eq!(
                other, rust,
                "{case}: {stem} admits differently from the Rust guest"
            );
        }
    }
}

#[test]
fn the_three_cache_operators_convert_alike_through_the_hosts_checks() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guests = load(&runtime, &MODULES, None);
    let status = json!({"phase": "Degraded", "readyReplicas": 1, "observedGeneration": 3,
        "lastGoodImage": "redis:7.2", "failedImage": "redis:7.4-never-ready",
        "conditions": [{"type": "Upgraded", "status": "False", "reason": "RolledBack",
            "message": "m", "lastTransitionTime": EARLIER}]});
    let mut full = cache_in(
        "v1alpha1",
        json!({"image": "redis:7.2", "replicas": 2, "port": 6380, "paused": true,
            "config": {"redis.conf": "maxmemory 64mb\n", "b": "2", "a": "1", "é": "x"},
            "auth": {"secretRef": {"name": "s", "key": "k"}},
            "upgrade": {"timeoutSeconds": 30}, "unknownField": {"kept": true}}),
    );
    full["status"] = status;
    full["metadata"]["labels"] = json!({"team": "a"});
    let beta = cache_in(
        "v1beta1",
        json!({"image": "redis:7.4", "ports": {"client": 7000},
            "config": [{"name": "maxmemory", "value": "32mb"}, {"name": "hz"}]}),
    );
    let cases: Vec<(&str, Vec<Value>, &str, &str)> = vec![
        (
            "up to v1beta1",
            vec![
                full.clone(),
                cache_in("v1alpha1", json!({"image": "redis:7.2"})),
            ],
            "apps.example.com/v1beta1",
            "\"ports\"",
        ),
        (
            "down to v1alpha1",
            vec![beta.clone()],
            "apps.example.com/v1alpha1",
            "\"port\":7000",
        ),
        (
            "the same version",
            vec![beta.clone()],
            "apps.example.com/v1beta1",
            "\"hz\"",
        ),
        (
            "an unknown version",
            vec![full.clone()],
            "apps.example.com/v9",
            "from v1alpha1 to v9",
        ),
        (
            "another group",
            vec![full.clone()],
            "other.example.com/v1beta1",
            "group",
        ),
        (
            "a name twice",
            vec![cache_in(
                "v1beta1",
                json!({"config": [{"name": "a", "value": "1"}, {"name": "a", "value": "2"}]}),
            )],
            "apps.example.com/v1alpha1",
            "\\\"a\\\" twice",
        ),
        (
            "a port v1alpha1 cannot hold",
            vec![cache_in(
                "v1beta1",
                json!({"ports": {"client": 1, "admin": 2, "metrics": 3}}),
            )],
            "apps.example.com/v1alpha1",
            "ports.admin",
        ),
        (
            "a config of the wrong shape",
            vec![cache_in("v1alpha1", json!({"config": ["x"]}))],
            "apps.example.com/v1beta1",
            "must be a map",
        ),
    ];
    for (case, objects, desired, shows) in cases {
        let answers: Vec<Value> = guests
            .iter()
            .map(|guest| match offline::convert(guest, &objects, desired) {
                Ok(converted) => json!(converted),
                Err(e) => json!({"error": format!("{e:#}")}),
            })
            .collect();
        let rust = &answers[0];
        assert!(
            rust.to_string().contains(shows),
            "{case}: the Rust guest answered {rust:#}"
        );
        for (stem, other) in MODULES.iter().zip(&answers).skip(1) {
            assert_eq!(
                other, rust,
                "{case}: {stem} converts differently from the Rust guest"
            );
        }
    }
    // A round trip gives back the same object.
    for guest in &guests {
        let there = offline::convert(
            guest,
            std::slice::from_ref(&full),
            "apps.example.com/v1beta1",
        )
        .unwrap();
        let back = offline::convert(guest, &there, "apps.example.com/v1alpha1").unwrap();
        assert_eq!(
            back,
            [full.clone()],
            "{}: a round trip changed the Cache",
            guest.name()
        );
    }
}

#[test]
fn the_three_cache_operators_read_a_v1beta1_parent_alike() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guests = load(&runtime, &MODULES, Some(r#"{"version": "v1beta1"}"#));
    let mut parent = cache_in(
        "v1beta1",
        json!({"image": "redis:7.2", "replicas": 2, "ports": {"client": 6380},
            "config": [{"name": "maxmemory", "value": "64mb"}]}),
    );
    parent["metadata"]["generation"] = json!(1);
    let request = Request {
        parent,
        observed: vec![],
        deleting: false,
        related: vec![],
    };
    let rust = answer(&guests[0], &request);
    assert_eq!(
        rust["children"][2]["spec"]["ports"][0]["port"], 6380,
        "{rust:#}"
    );
    assert_eq!(rust["children"][0]["data"]["maxmemory"], "64mb", "{rust:#}");
    for (stem, guest) in MODULES.iter().zip(&guests).skip(1) {
        assert_eq!(
            answer(guest, &request),
            rust,
            "{stem} reads v1beta1 differently"
        );
    }
}

#[test]
fn the_three_registry_builds_answer_a_refused_registry_alike() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    // No origin is granted: the host refuses every request, which each
    // guest reports as a registration that cannot have been stored.
    let guests = load(
        &runtime,
        &REGISTRY_MODULES,
        Some(r#"{"registryUrl": "http://127.0.0.1:9/"}"#),
    );
    for guest in &guests {
        assert!(
            guest.imports_http(),
            "{} does not import wasi:http",
            guest.name()
        );
    }
    let hash = "ea59eebecc7056b9";
    let spec = json!({"image": "redis:7.2", "replicas": 2, "config": {"maxmemory": "64mb"}});
    let ready =
        json!({"observedGeneration": 4, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2});
    let registered = json!([{"type": "Registered", "status": "True", "reason": "Registered",
        "message": "registered as demo.default.svc:6379", "lastTransitionTime": EARLIER,
        "observedGeneration": 2}]);
    let cases = [
        (
            "ready: registration refused",
            Request {
                parent: cache(
                    spec.clone(),
                    Some(json!({"phase": "Progressing", "conditions": conditions("True", "True")})),
                ),
                observed: vec![deployment(2, hash, ready.clone()), service()],
                deleting: false,
                related: vec![],
            },
            "RegistrationRefused",
        ),
        (
            "deleting a registered Cache: cleanup blocked",
            Request {
                parent: cache(
                    spec.clone(),
                    Some(json!({"phase": "Ready", "conditions": registered})),
                ),
                observed: vec![deployment(0, hash, json!({"replicas": 0})), service()],
                deleting: true,
                related: vec![],
            },
            "CleanupBlocked",
        ),
    ];
    for (case, request, reason) in cases {
        let rust = answer(&guests[0], &request);
        let text = rust.to_string();
        assert!(
            text.contains(reason)
                && text.contains("refused by the host: ErrorCode::HttpRequestDenied"),
            "{case}: the Rust guest answered {rust:#}"
        );
        for (stem, guest) in REGISTRY_MODULES.iter().zip(&guests).skip(1) {
            assert_eq!(
                answer(guest, &request),
                rust,
                "{case}: {stem} answers differently"
            );
        }
    }
}

/// `operator.wit` with its package line naming `version`, in a directory
/// of its own.
fn wit_of_version(version: &str) -> WitDir {
    let dir =
        WitDir(std::env::temp_dir().join(format!("wasmop-wit-{version}-{}", std::process::id())));
    std::fs::create_dir_all(dir.path()).unwrap();
    let text =
        std::fs::read_to_string(support::workspace().join("wit/operator@0.1.0/operator.wit"))
            .unwrap();
    let text = text.replace(
        "package wasmop:operator@0.1.0;",
        &format!("package wasmop:operator@{version};"),
    );
    std::fs::write(dir.path().join("operator.wit"), text).unwrap();
    dir
}

/// A directory removed when dropped.
struct WitDir(std::path::PathBuf);

impl WitDir {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for WitDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn both_sdks_refuse_to_build_against_another_contract_version() {
    let wit = wit_of_version("0.2.0");
    let out = wit.path().join("guest.wasm");
    let root = support::workspace();
    let ts = std::process::Command::new("node")
        .arg(root.join("guests/sdk-ts/build.mjs"))
        .args(["component", "src/index.ts", "--out"])
        .arg(&out)
        .arg("--wit")
        .arg(wit.path())
        .current_dir(root.join("guests/cache-operator-ts"))
        .output()
        .unwrap();
    let py = std::process::Command::new("python3")
        .arg(root.join("guests/sdk-py/build.py"))
        .args(["component", ".", "--out"])
        .arg(&out)
        .arg("--wit")
        .arg(wit.path())
        .current_dir(root.join("guests/cache-operator-py"))
        .output()
        .unwrap();
    for (lang, output) in [("TypeScript", ts), ("Python", py)] {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{lang}: built against 0.2.0");
        assert!(
            stderr.contains("is the contract wasmop:operator@0.2.0, but this SDK is written for wasmop:operator@0.1.0"),
            "{lang}: {stderr}"
        );
        assert!(!out.exists(), "{lang} wrote a component");
    }
}

/// The hostile test guest in each language: its `admit` and `convert`
/// misbehave as `spec.attack` says, past the SDKs' own checks.
const HOSTILE_MODULES: [&str; 3] = ["hostile", "hostile-ts", "hostile-py"];

/// A Hostile object attacking with `attack`.
fn hostile(attack: &str) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
        "metadata": {"name": attack, "namespace": "default", "uid": "u-1"}, "spec": {"attack": attack}})
}

#[test]
fn the_host_refuses_a_typescript_or_python_guests_bad_verdicts_and_conversions_as_the_rust_ones() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guests = load(&runtime, &HOSTILE_MODULES, None);
    // What the host's checks say of each (the webhooks' and render's own).
    let verdicts = [
        ("admit-rename", "metadata.name"),
        ("admit-owner", "metadata.ownerReferences"),
        ("admit-finalizer", "metadata.finalizers"),
        ("admit-host-label", "wasmop.dev/guest"),
        ("admit-status", "status"),
        ("admit-kind", "kind"),
        ("admit-bad-patch", "not a JSON Patch"),
        ("admit-bad-code", "not an HTTP error status"),
        ("admit-warnings", "1000 warnings"),
        ("admit-deny", "hostile says no"),
    ];
    for (attack, says) in verdicts {
        let mut review = admission_review("CREATE", &hostile(attack));
        review["request"]["kind"] =
            json!({"group": "test.wasmop.dev", "version": "v1alpha1", "kind": "Hostile"});
        let answers: Vec<String> = guests
            .iter()
            .map(|guest| match offline::admit(guest, review.clone()) {
                Ok(admitted) => serde_json::to_value(admitted).unwrap().to_string(),
                Err(e) => format!("refused: {e:#}"),
            })
            .collect();
        assert!(
            answers[0].contains(says),
            "{attack}: the Rust guest: {}",
            answers[0]
        );
        if attack != "admit-deny" {
            assert!(
                answers[0].starts_with("refused: "),
                "{attack}: {}",
                answers[0]
            );
        }
        for (stem, other) in HOSTILE_MODULES.iter().zip(&answers).skip(1) {
            assert_eq!(
                other, &answers[0],
                "{attack}: the host treats {stem} otherwise"
            );
        }
    }
    // Something thrown in admit is the guest's failure: a trap whose
    // message the host reports, never a verdict.
    let mut review = admission_review("CREATE", &hostile("admit-throw"));
    review["request"]["kind"] =
        json!({"group": "test.wasmop.dev", "version": "v1alpha1", "kind": "Hostile"});
    for (stem, guest) in HOSTILE_MODULES.iter().zip(&guests).skip(1) {
        let err = format!("{:#}", offline::admit(guest, review.clone()).unwrap_err());
        assert!(err.contains("trapped"), "{stem}: {err}");
        assert!(
            err.contains("hostile threw in admit") || err.contains("hostile raised in admit"),
            "{stem}: {err}"
        );
    }
    let conversions = [
        ("convert-rename", "changed metadata.name"),
        ("convert-drop", "answered 0 objects for 1"),
        ("convert-stale", "has apiVersion"),
        ("convert-host-label", "under wasmop.dev/"),
        ("convert-host-condition", "GuestReconciled"),
    ];
    for (attack, says) in conversions {
        let answers: Vec<String> = guests
            .iter()
            .map(|guest| {
                match offline::convert(guest, &[hostile(attack)], "test.wasmop.dev/v1beta1") {
                    Ok(converted) => format!("converted: {}", json!(converted)),
                    Err(e) => format!("refused: {e:#}"),
                }
            })
            .collect();
        assert!(
            answers[0].starts_with("refused: ") && answers[0].contains(says),
            "{attack}: the Rust guest: {}",
            answers[0]
        );
        for (stem, other) in HOSTILE_MODULES.iter().zip(&answers).skip(1) {
            assert_eq!(
                other, &answers[0],
                "{attack}: the host treats {stem} otherwise"
            );
        }
    }
}
