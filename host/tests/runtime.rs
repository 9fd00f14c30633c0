//! The wasm runtime on its own, no cluster: what happens when more guest
//! calls run at once than the instance pool holds.

mod support;

use std::time::Duration;

use serde_json::json;
use wasmop_host::model::Request;
use wasmop_host::runtime::{CallError, Limits, Runtime, RuntimeConfig};

/// Loads the built guest `stem` under `limits`.
fn load(runtime: &Runtime, stem: &str, limits: Limits) -> wasmop_host::runtime::Guest {
    let bytes = std::fs::read(support::guest_module(stem).unwrap()).unwrap();
    runtime.load(stem, &bytes, limits).unwrap().0
}

fn hostile(attack: &str) -> Request {
    Request {
        parent: json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
            "metadata": {"name": attack, "namespace": "default", "uid": "u"},
            "spec": {"attack": attack}}),
        observed: vec![],
        deleting: false,
    }
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
    assert_eq!(err.reason(), "GuestPoolExhausted");
    assert!(err.is_retryable());
    assert!(err.to_string().contains("--instance-pool"), "{err}");

    let spun = busy.join().unwrap().unwrap_err();
    assert_eq!(spun.reason(), "GuestTimeout", "{spun}");
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
