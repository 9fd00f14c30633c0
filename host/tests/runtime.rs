//! The wasm runtime on its own, no cluster: what happens when more guest
//! calls run at once than the instance pool holds, what a guest component
//! imports, the time a reconcile runs at, and how a panic is reported.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use wasmop_host::model::Request;
use wasmop_host::runtime::{
    CallError, CompileLimits, Compiler, Error, Limits, ModuleBytes, Runtime, RuntimeConfig,
};

fn module(stem: &str) -> ModuleBytes {
    ModuleBytes::new(std::fs::read(support::guest_module(stem).unwrap()).unwrap())
}

/// Loads the built guest `stem` under `limits`.
fn load(runtime: &Runtime, stem: &str, limits: Limits) -> wasmop_host::runtime::Guest {
    runtime.load(stem, &module(stem), limits, None).unwrap().0
}

fn hostile(attack: &str) -> Request {
    Request::of(
        json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
            "metadata": {"name": attack, "namespace": "default", "uid": "u"},
            "spec": {"attack": attack}}),
    )
}

#[test]
fn a_full_instance_pool_fails_a_call_clearly_and_retryably_then_recovers() {
    let runtime = Runtime::new(RuntimeConfig {
        instance_pool: 1,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let guest = load(&runtime, "hostile", Limits::default());
    let spinner = load(
        &runtime,
        "hostile",
        Limits {
            timeout: Duration::from_millis(600),
            ..Limits::default()
        },
    );

    // The spinner holds the only slot until its deadline cuts it off.
    let busy = std::thread::spawn(move || spinner.reconcile(&hostile("loop")));
    std::thread::sleep(Duration::from_millis(200));
    let err = guest.reconcile(&hostile("none")).unwrap_err();
    assert!(matches!(err, CallError::PoolExhausted(_)), "{err}");
    assert_eq!(err.reason().as_str(), "GuestPoolExhausted");
    assert!(err.is_retryable());
    assert!(err.to_string().contains("--instance-pool"), "{err}");

    let spun = busy.join().unwrap().unwrap_err();
    assert_eq!(spun.reason().as_str(), "GuestTimeout", "{spun}");
    // The slot is back: the same call now succeeds.
    let answer = guest.reconcile(&hostile("none")).unwrap();
    assert_eq!(answer.children.len(), 1);
}

#[test]
fn an_oversized_instance_pool_is_capped_and_the_runtime_still_serves() {
    let runtime = Runtime::new(RuntimeConfig {
        instance_pool: u32::MAX,
        ..RuntimeConfig::default()
    })
    .unwrap();
    assert!(runtime.is_pooled());
    let guest = load(&runtime, "hostile", Limits::default());
    let answer = guest.reconcile(&hostile("none")).unwrap();
    assert_eq!(answer.children.len(), 1);
}

/// Set in the child process of the next test.
const LIMITED: &str = "WASMOP_TEST_ADDRESS_SPACE_LIMITED";

#[test]
fn without_address_space_for_the_pool_instances_are_allocated_on_demand() {
    if std::env::var_os(LIMITED).is_some() {
        // 16 GB of address space: not enough for 256 slots of 4 GiB memories.
        let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
        assert!(!runtime.is_pooled());
        let guest = load(&runtime, "hostile", Limits::default());
        let answer = guest.reconcile(&hostile("none")).unwrap();
        assert_eq!(answer.children.len(), 1);
        return;
    }
    // Run this very test again in a child process under `ulimit -v`.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -v 16000000 && exec "$0" --exact "$1" --test-threads 1"#)
        .arg(std::env::current_exe().unwrap())
        .arg("without_address_space_for_the_pool_instances_are_allocated_on_demand")
        .env(LIMITED, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child under ulimit -v failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sorted import names of the built guest `stem`.
fn imports_of(stem: &str) -> Vec<String> {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let bytes = std::fs::read(support::guest_module(stem).unwrap()).unwrap();
    let component = wasmtime::component::Component::new(runtime.engine(), &bytes).unwrap();
    let mut imports: Vec<String> = component
        .component_type()
        .imports(runtime.engine())
        .map(|(name, _)| name.to_owned())
        .collect();
    imports.sort();
    imports
}

#[test]
fn the_cache_operator_component_imports_nothing_but_the_log() {
    let imports = imports_of("cache-operator");
    // Plus the shared `types` interface, which has no functions.
    assert_eq!(
        imports,
        ["wasmop:operator/log@0.1.0", "wasmop:operator/types@0.1.0"],
        "no WASI: no clock, filesystem, environment or sockets of its own"
    );
}

#[test]
fn the_registry_build_adds_outbound_http_and_nothing_else() {
    let imports: Vec<String> = imports_of("cache-operator-registry")
        .iter()
        .map(|name| name.split('@').next().unwrap_or(name).to_owned())
        .collect();
    // `wasi:http` and the streams its bodies are: no clock, filesystem,
    // environment or sockets, and HTTP only as far as allowedOutboundHosts
    // grants.
    assert_eq!(
        imports,
        [
            "wasi:http/outgoing-handler",
            "wasi:http/types",
            "wasi:io/error",
            "wasi:io/poll",
            "wasi:io/streams",
            "wasmop:operator/log",
            "wasmop:operator/types"
        ],
    );
}

#[test]
fn what_a_guest_keeps_on_the_host_side_through_wasi_http_is_bounded() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    // The bound under test is the resource table's, not the deadline's: on a
    // busy machine the hoard can run past 1 s before the table fills.
    let limits = Limits {
        timeout: Duration::from_secs(30),
        ..Limits::default()
    };
    let guest = load(&runtime, "hostile", limits);
    // 100,000 header maps of 8 KiB would be 800 MiB of host memory, none of
    // it in the guest's linear memory: the resource table stops it.
    let outcome = match guest.reconcile(&hostile("http-hoard")) {
        Ok(response) => response.status.unwrap_or_default(),
        Err(e) => e.to_string(),
    };
    let kept: usize = outcome
        .split("\"hoard\":\"")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        kept <= 1024 && (outcome.contains("kept") || outcome.contains("resource")),
        "{outcome}"
    );
    // And the runtime keeps serving.
    assert!(guest.reconcile(&hostile("none")).is_ok());
}

#[test]
fn a_reconcile_runs_at_the_hosts_time() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guest = load(&runtime, "cache-operator", Limits::default());
    let request = Request::of(
        json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": "clock", "namespace": "default", "uid": "u", "generation": 1},
            "spec": {"image": "redis:7.2", "replicas": 1, "port": 6379}}),
    );
    let seconds = |at: SystemTime| at.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let before = seconds(SystemTime::now());
    let answer = guest.reconcile(&request).unwrap();
    let after = seconds(SystemTime::now());
    let status: serde_json::Value =
        serde_json::from_str(answer.status.as_deref().unwrap()).unwrap();
    let stamped = status["conditions"][0]["lastTransitionTime"]
        .as_str()
        .unwrap();
    let stamped = stamped
        .parse::<k8s_openapi::jiff::Timestamp>()
        .unwrap()
        .as_second()
        .unsigned_abs();
    assert!(
        (before..=after).contains(&stamped),
        "transition stamped {stamped}, call ran from {before} to {after}"
    );
}

#[test]
fn a_guest_panic_is_reported_with_its_message() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guest = load(&runtime, "hostile", Limits::default());
    let err = guest.reconcile(&hostile("panic")).unwrap_err();
    assert_eq!(err.reason().as_str(), "GuestTrap");
    let CallError::Trap { reason, detail, .. } = &err else {
        panic!("expected a trap, got {err}")
    };
    assert_eq!(reason, "panic");
    assert!(
        detail
            .as_deref()
            .is_some_and(|d| d.contains("hostile guest panics on purpose")),
        "{err}"
    );
}

#[test]
fn a_trap_shows_the_guests_own_stack_with_file_and_line_in_a_debug_build() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let debug = load(&runtime, "hostile-debug", Limits::default());
    let err = debug.reconcile(&hostile("panic")).unwrap_err();
    let frames = err.frames();
    eprintln!("{frames:#?}");
    assert!(!frames.is_empty() && frames.len() <= 8, "{frames:#?}");
    assert!(
        frames[0].contains("hostile_guest") && frames[0].contains("guests/hostile/src/lib.rs:"),
        "the innermost frame is the guest's panic, with file and line: {frames:#?}"
    );
    assert!(
        frames
            .iter()
            .all(|f| !f.starts_with("std::") && !f.starts_with("core::")),
        "no panic machinery: {frames:#?}"
    );
    // The Event and the condition keep one line.
    assert!(!err.to_string().contains('\n'), "{err}");
    // A build that strips its names (the `guest` profile) says so.
    let release = load(&runtime, "hostile", Limits::default());
    let err = release.reconcile(&hostile("panic")).unwrap_err();
    assert_eq!(err.frames(), [wasmop_host::runtime::guest::STRIPPED]);
}

#[test]
fn a_guest_cannot_make_the_host_copy_far_more_than_its_response_limit() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let guest = load(&runtime, "hostile", Limits::default());
    // Two million empty children: no JSON to speak of, tens of MiB of
    // strings on the host if it copied them all.
    let err = guest.reconcile(&hostile("many-strings")).unwrap_err();
    assert!(matches!(err, CallError::CopyLimit { .. }), "{err}");
    assert_eq!(err.reason().as_str(), "GuestResponseTooLarge");
    assert!(err.is_retryable());
}

/// Loads the hostile guest with `settings` as its guest-list settings.
fn load_with(settings: serde_json::Value) -> Result<wasmop_host::runtime::Guest, Error> {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    runtime
        .load(
            "hostile",
            &module("hostile"),
            Limits::default(),
            Some(settings.to_string()),
        )
        .map(|(guest, _)| guest)
}

#[test]
fn a_description_the_host_refuses_fails_the_load_with_its_reason() {
    for (attack, needle) in [
        ("builtin-primary", "built-in kind"),
        ("child-is-primary", "is the primary kind"),
        ("duplicate-child", "declared more than once"),
        ("two-versions", "declared more than once"),
        ("wildcard", "\"*\""),
        ("empty-kind", "must not be empty"),
        ("bad-finalizer", "domain prefix"),
        ("too-many-children", "at most 32"),
    ] {
        let err = load_with(json!({"describe": attack})).unwrap_err();
        assert!(
            matches!(err, Error::InvalidDescription(_)),
            "{attack}: {err}"
        );
        assert!(err.to_string().contains(needle), "{attack}: {err}");
    }
}

#[test]
fn settings_the_guest_refuses_fail_the_load_and_good_ones_reach_the_guest() {
    let err = load_with(json!({"describe": "refuse-settings"})).unwrap_err();
    assert!(matches!(err, Error::InvalidSettings(_)), "{err}");
    assert!(err.to_string().contains("refused on purpose"), "{err}");
    let err = load_with(json!({"colour": "blue"})).unwrap_err();
    assert!(err.to_string().contains("colour"), "{err}");
    let guest = load_with(json!({})).unwrap();
    assert_eq!(guest.settings(), Some("{}"));
    assert_eq!(guest.description().children.len(), 3);
}

#[test]
fn compiled_versions_no_guest_runs_are_dropped_from_memory_but_the_two_used_last() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let mut rebuilt = std::fs::read(support::guest_module("cache-operator").unwrap()).unwrap();
    wasm_encoder::ComponentSection::append_to_component(
        &wasm_encoder::CustomSection {
            name: "wasmop-test-rebuild".into(),
            data: b"1".into(),
        },
        &mut rebuilt,
    );
    let versions = [
        module("cache-operator"),
        module("cache-operator-v2"),
        module("hostile"),
        ModuleBytes::new(rebuilt),
    ];
    for version in &versions {
        runtime.cache().get_or_compile(version).unwrap();
    }
    assert_eq!(runtime.cache().len(), 4);
    // Only the hostile guest runs: of the three others, the two used last
    // stay for a cheap swap back, the oldest goes.
    let in_use = versions[2].digest().to_owned();
    assert_eq!(runtime.cache().retain(|d| d == in_use), 1);
    assert_eq!(runtime.cache().len(), 3);
    // The dropped one compiles again on demand.
    let (_, outcome) = runtime.cache().get_or_compile(&versions[0]).unwrap();
    assert_eq!(outcome.hit, wasmop_host::runtime::cache::CacheHit::Miss);
}

fn compiled_by(worker: &str) -> Runtime {
    compiled_within(worker, CompileLimits::default())
}

fn compiled_within(worker: &str, limits: CompileLimits) -> Runtime {
    Runtime::new(RuntimeConfig {
        compiler: Compiler::Worker {
            exe: worker.into(),
            limits,
        },
        ..RuntimeConfig::default()
    })
    .unwrap()
}

#[test]
fn a_module_compiled_in_the_worker_process_runs_as_one_compiled_here() {
    let runtime = compiled_by(env!("CARGO_BIN_EXE_wasmop"));
    let guest = load(&runtime, "hostile", Limits::default());
    let answer = guest.reconcile(&hostile("none")).unwrap();
    assert_eq!(answer.children.len(), 1);
    // A guest the SDK builds without WASI, and its swap to a second version.
    load(&runtime, "cache-operator", Limits::default());
    load(&runtime, "cache-operator-v2", Limits::default());
}

/// Why loading `bytes` fails.
fn load_error(runtime: &Runtime, bytes: &ModuleBytes) -> String {
    runtime
        .load("broken", bytes, Limits::default(), None)
        .map(|_| ())
        .unwrap_err()
        .to_string()
}

#[test]
fn a_module_the_worker_cannot_compile_fails_the_load_as_it_would_here() {
    let not_wasm = ModuleBytes::new(b"\0asm\x0d\0\x01\0 not a component".to_vec());
    let here = Runtime::new(RuntimeConfig::default()).unwrap();
    let worker = compiled_by(env!("CARGO_BIN_EXE_wasmop"));
    let (in_process, in_worker) = (load_error(&here, &not_wasm), load_error(&worker, &not_wasm));
    assert!(
        in_worker.starts_with("not a valid WebAssembly component: "),
        "{in_worker}"
    );
    assert_eq!(in_worker, in_process);
}

#[test]
fn a_compiling_process_that_fails_is_a_clear_load_error() {
    // Broken or replaced: the worker is missing, exits without an
    // artifact, or fails.
    let cases = [
        (
            "/nonexistent/wasmop",
            "starting /nonexistent/wasmop compile-worker",
        ),
        ("/bin/true", "(/bin/true compile-worker) wrote no artifact"),
        (
            "/bin/false",
            "the compiling process (/bin/false compile-worker) failed",
        ),
    ];
    for (worker, expected) in cases {
        let err = load_error(&compiled_by(worker), &module("hostile"));
        assert!(err.contains(expected), "{worker}: {err}");
    }
}

#[test]
fn a_compile_past_its_limits_fails_that_load_alone() {
    let wasmop = env!("CARGO_BIN_EXE_wasmop");
    // Compiling the Python guest (18 MiB) took 11 CPU seconds and 373 MiB
    // here, the hostile guest 1 s and 65 MiB: the kernel stops the worker
    // at either limit for the first alone.
    let python = module("cache-operator-py");
    let cases: [(CompileLimits, &[&str]); 2] = [
        (
            CompileLimits {
                cpu_seconds: 3,
                ..CompileLimits::default()
            },
            &["past its 3 CPU seconds"],
        ),
        (
            CompileLimits {
                memory_mib: 128,
                ..CompileLimits::default()
            },
            &[
                "memory allocation of",
                "a compile may use 128 MiB of memory",
            ],
        ),
    ];
    for (limits, expected) in cases {
        let runtime = compiled_within(wasmop, limits);
        let err = load_error(&runtime, &python);
        for text in expected {
            assert!(err.contains(text), "{limits:?}: {err}");
        }
        // The same runtime still compiles and runs what fits.
        let guest = load(&runtime, "hostile", Limits::default());
        assert_eq!(guest.reconcile(&hostile("none")).unwrap().children.len(), 1);
    }
}
