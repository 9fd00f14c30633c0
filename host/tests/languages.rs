//! The cache-operator in Rust, TypeScript, Python and Go answers alike: each
//! passes the shared case set `guests/cases/cache-operator` under
//! `wasmop test` (every reconcile stage, the admission webhook, conversions
//! both ways), converts a Cache to v1beta1 and back without a change, and
//! their registry builds give the same registration answers. Transition
//! times in the registry answers are compared as "set now" or "kept from
//! the parent", since each call reads the clock.
//!
//! The host refuses a TypeScript or Python guest's bad verdicts and
//! conversions (the hostile guest's attacks, past the SDKs' own checks)
//! exactly as it refuses the Rust hostile guest's; the hostile guest's
//! sandbox attacks end under `wasmop test` as the host ends them, and so do
//! the Go hostile guest's (heap, spin, goroutines, panics), whose trap shows
//! the guest's own frames; and the SDKs' builds (`build.mjs`, `build.py`,
//! `wasmop build`) refuse a WIT of another contract version.

mod support;

use serde_json::{Value, json};
use wasmop_host::model::Request;
use wasmop_host::runtime::{Guest, Limits, ModuleBytes, Runtime, RuntimeConfig};
use wasmop_host::webhook::offline;

const MODULES: [&str; 4] = [
    "cache-operator",
    "cache-operator-ts",
    "cache-operator-py",
    "cache-operator-go",
];
/// The builds that import `wasi:http` for their `registryUrl`.
const REGISTRY_MODULES: [&str; 4] = [
    "cache-operator-registry",
    "cache-operator-ts-registry",
    "cache-operator-py-registry",
    "cache-operator-go-registry",
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

/// A guest's `memoryLimit` holds for these engines too: the TypeScript,
/// Python and Go components need megabytes of memory before any reconcile
/// code runs (Go's runtime, kept in the module, about 5 MiB), and under a cap smaller than that every call fails as
/// `GuestMemoryLimit`, named, instead of trapping some other way.
#[test]
fn the_memory_limit_applies_to_typescript_python_and_go_guests() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let request = Request::of(cache(json!({"image": "redis:7.2", "replicas": 2}), None));
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

/// `wasmop test --guest <module> <cases>`: whether it passed, and what it
/// printed.
fn wasmop_test(module: &std::path::Path, cases: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["test", "--guest"])
        .arg(module)
        .arg("--cache-dir")
        .arg(support::workspace().join("target/tmp/wasmop-test-cache"))
        .arg(cases)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.success(), format!("{stdout}{stderr}"))
}

/// The cases of `dir`, counted.
fn count_cases(dir: &std::path::Path) -> usize {
    wasmop_host::cases::files(&[dir.to_owned()])
        .unwrap()
        .iter()
        .map(|file| wasmop_host::cases::read(file).unwrap().cases.len())
        .sum()
}

/// The shared case set (`guests/cases/cache-operator`): reconciles of every
/// stage (new, rolling out, ready, paused, invalid, deleting, an upgrade's
/// rolling out, completed, rolled back, held back and cancelled, the
/// password Secret missing and found, a v1beta1 parent), the admission
/// webhook's defaults and refusals, and conversions both ways and their
/// refusals. Each language's guest passes every case.
#[test]
fn every_languages_cache_operator_passes_the_shared_cases() {
    let cases = support::workspace().join("guests/cases/cache-operator");
    let total = count_cases(&cases);
    assert!(total >= 40, "{total} cases");
    for stem in MODULES {
        let (passed, out) = wasmop_test(&support::guest_module(stem).unwrap(), &cases);
        assert!(passed, "{stem}:\n{out}");
        assert_eq!(
            out.lines().filter(|l| l.starts_with("ok ")).count(),
            total,
            "{stem}:\n{out}"
        );
        assert!(
            out.contains(&format!("test result: ok. {total} passed; 0 failed")),
            "{stem}:\n{out}"
        );
    }
}

/// The hostile guest's attacks under `wasmop test` (`guests/hostile/cases`):
/// each ends as the host ends it, named, and the run goes on.
#[test]
fn the_hostile_guests_attacks_end_under_wasmop_test_as_the_host_ends_them() {
    let cases = support::workspace().join("guests/hostile/cases");
    let (passed, out) = wasmop_test(&support::guest_module("hostile").unwrap(), &cases);
    assert!(passed, "{out}");
    let total = count_cases(&cases);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        total,
        "{out}"
    );
}

/// The Go hostile guest's attacks under `wasmop test`
/// (`guests/hostile-go/cases`): a heap past the memory cap, a spin, ten
/// thousand goroutines left waiting, a spinning goroutine, a panic, a
/// panic inside a goroutine, a wait no goroutine ends and a sleep: each
/// ends as the host ends any guest's, named, and the run goes on.
#[test]
fn the_go_hostile_guests_attacks_end_under_wasmop_test_as_the_host_ends_them() {
    let cases = support::workspace().join("guests/hostile-go/cases");
    let (passed, out) = wasmop_test(&support::guest_module("hostile-go").unwrap(), &cases);
    assert!(passed, "{out}");
    let total = count_cases(&cases);
    assert!(total >= 9, "{total} cases");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        total,
        "{out}"
    );
}

/// A Go guest's panic is a trap that shows the guest's own functions, by
/// the names Go's linker writes into the module, with the panic's message
/// and place; so is a panic inside a goroutine, whose message is Go's own.
#[test]
fn a_go_trap_shows_the_guests_own_frames() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guest = load(&runtime, &["hostile-go"], None).remove(0);
    for (attack, frame, message) in [
        (
            "go-panic",
            "wasmop.dev_hostile_go.Hostile.Reconcile",
            "panicked at wasmop.dev/hostile-go/hostile.go",
        ),
        (
            "go-goroutine-panic",
            "wasmop.dev_hostile_go.explode",
            "panic: hostile panics in a goroutine",
        ),
    ] {
        let err = guest.reconcile(&Request::of(hostile(attack))).unwrap_err();
        assert_eq!(err.reason().as_str(), "GuestTrap", "{attack}: {err}");
        assert!(err.to_string().contains(message), "{attack}: {err}");
        assert!(
            err.frames().iter().any(|f| f.contains(frame)),
            "{attack}: no frame {frame} in {:#?}",
            err.frames()
        );
    }
}

/// A Cache converted to v1beta1 and back is the same Cache, byte for byte
/// as JSON, in every language (the shared cases' conversions match a
/// subset; this one matches the whole object).
#[test]
fn a_round_trip_through_v1beta1_gives_back_the_same_cache() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guests = load(&runtime, &MODULES, None);
    let file = support::workspace().join("guests/cases/cache-operator/conversion.yaml");
    let first = wasmop_host::cases::read(&file)
        .unwrap()
        .cases
        .remove(0)
        .unwrap();
    let full = first.conversion.unwrap().objects.remove(0);
    assert!(full["status"].is_object() && full["spec"]["unknownField"].is_object());
    for guest in &guests {
        let there = offline::convert(
            guest,
            std::slice::from_ref(&full),
            "apps.example.com/v1beta1",
        )
        .unwrap();
        let back = offline::convert(guest, &there, "apps.example.com/v1alpha1").unwrap();
        assert_eq!(
            back.as_slice(),
            std::slice::from_ref(&full),
            "{}: a round trip changed the Cache",
            guest.name()
        );
    }
}

#[test]
fn every_registry_build_answers_a_refused_registry_alike() {
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
            Request::of(cache(
                spec.clone(),
                Some(json!({"phase": "Progressing", "conditions": conditions("True", "True")})),
            ))
            .observing(vec![deployment(2, hash, ready.clone()), service()]),
            "RegistrationRefused",
        ),
        (
            "deleting a registered Cache: cleanup blocked",
            Request::of(cache(
                spec.clone(),
                Some(json!({"phase": "Ready", "conditions": registered})),
            ))
            .observing(vec![deployment(0, hash, json!({"replicas": 0})), service()])
            .being_deleted(),
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
fn every_sdk_refuses_to_build_against_another_contract_version() {
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
    let go = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .arg("build")
        .arg(root.join("guests/cache-operator-go"))
        .arg("--wit")
        .arg(wit.path())
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    for (lang, output) in [("TypeScript", ts), ("Python", py), ("Go", go)] {
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
