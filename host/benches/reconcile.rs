//! The whole host-side cost of one cache-operator reconcile, wasm vs native.
//!
//! Wasm: fresh store + instance from the `InstancePre`, serialise a realistic
//! request (a Cache and its three observed children), call, lift the
//! response, validate it. Native: the same logic compiled into this bench,
//! doing the same serialise / parse / reconcile / serialise / validate work.
//! Prints both medians, p99s and the ratio; targets: ratio <= 1.5 and wasm
//! p50 <= 50 us. Run with `cargo xtask bench` (builds the guests first).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cache_operator::CacheOperator;
use serde_json::{Value, json};
use wasmop_guest::Operator;
use wasmop_host::model::{GuestEvent, RawResponse, Request};
use wasmop_host::runtime::{Limits, Runtime, RuntimeConfig};
use wasmop_host::validate::{ParentScope, validate};

const WARMUP: usize = 200;
const SAMPLES: usize = 3000;

fn guest_path() -> PathBuf {
    let dir = std::env::var_os("WASMOP_GUESTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/guests"));
    dir.join("cache-operator.wasm")
}

/// A converged Cache with the Deployment, Service and ConfigMap the API
/// server would hold for it (server fields included).
fn fixture() -> (Value, Vec<Value>) {
    let parent = json!({
        "apiVersion": "apps.example.com/v1alpha1",
        "kind": "Cache",
        "metadata": {"name": "demo-cache", "namespace": "default", "uid": "7d3c1c2e-0000-4000-8000-000000000001",
                     "generation": 3, "resourceVersion": "4711", "creationTimestamp": "2026-11-29T10:00:00Z",
                     "finalizers": ["apps.example.com/cache-cleanup"]},
        "spec": {"image": "redis:7.2", "replicas": 2, "port": 6379, "paused": false,
                 "config": {"maxmemory": "256mb", "maxmemory-policy": "allkeys-lru"}},
    });
    let first = CacheOperator::reconcile(wasmop_guest::Request::new(parent.clone(), vec![], false))
        .and_then(wasmop_guest::Response::into_wire)
        .expect("fixture renders");
    let observed = first
        .children
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let mut child: Value = serde_json::from_str(text).unwrap();
            let meta = child["metadata"].as_object_mut().unwrap();
            meta.insert("namespace".into(), "default".into());
            meta.insert("uid".into(), format!("7d3c1c2e-0000-4000-8000-00000000010{i}").into());
            meta.insert("resourceVersion".into(), "4800".into());
            meta.insert("creationTimestamp".into(), "2026-11-29T10:00:01Z".into());
            meta.insert("ownerReferences".into(), json!([{"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
                "name": "demo-cache", "uid": "7d3c1c2e-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}]));
            if child["kind"] == "Deployment" {
                child["status"] = json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
                    "updatedReplicas": 2, "availableReplicas": 2});
            }
            child
        })
        .collect();
    (parent, observed)
}

fn measure(mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..WARMUP {
        f();
    }
    let mut samples: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    samples
}

fn pct(samples: &[Duration], p: f64) -> Duration {
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let path = guest_path();
    let module = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the guests first: cargo xtask build-guests",
            path.display()
        )
    });
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let (guest, _) = runtime
        .load("cache-operator", &module, Limits::default())
        .expect("guest loads");
    let (parent, observed) = fixture();
    let request = Request {
        parent: parent.clone(),
        observed: observed.clone(),
        deleting: false,
    };
    let description = guest.description().clone();
    let limits = Limits::default();
    let scope = ParentScope {
        namespace: Some("default"),
    };

    let wasm = measure(|| {
        let raw = guest.reconcile(black_box(&request)).expect("reconcile");
        black_box(validate("cache-operator", &description, &limits, scope, raw).expect("valid"));
    });

    let native_once = || {
        let parent_text = black_box(&request.parent).to_string();
        let observed_text: Vec<String> = request.observed.iter().map(ToString::to_string).collect();
        let req =
            wasmop_guest::Request::from_json(&parent_text, &observed_text, false).expect("parse");
        black_box(
            CacheOperator::reconcile(req)
                .and_then(wasmop_guest::Response::into_wire)
                .expect("reconcile"),
        );
    };
    if std::env::var_os("WASMOP_BENCH_PROFILE_NATIVE").is_some() {
        for _ in 0..20_000 {
            native_once();
        }
        return;
    }
    let native = measure(|| {
        let parent_text = black_box(&request.parent).to_string();
        let observed_text: Vec<String> = request.observed.iter().map(ToString::to_string).collect();
        let req =
            wasmop_guest::Request::from_json(&parent_text, &observed_text, false).expect("parse");
        let wire = CacheOperator::reconcile(req)
            .and_then(wasmop_guest::Response::into_wire)
            .expect("reconcile");
        let raw = RawResponse {
            children: wire.children,
            status: wire.status,
            requeue_after_seconds: wire.requeue_after_seconds,
            finalized: wire.finalized,
            events: Vec::<GuestEvent>::new(),
        };
        black_box(validate("cache-operator", &description, &limits, scope, raw).expect("valid"));
    });

    let (w50, n50) = (pct(&wasm, 0.5), pct(&native, 0.5));
    let ratio = w50.as_secs_f64() / n50.as_secs_f64();
    println!("cache-operator reconcile, host-side cost ({SAMPLES} samples each)");
    println!(
        "  wasm   p50 {:>8.1} us   p99 {:>8.1} us",
        us(w50),
        us(pct(&wasm, 0.99))
    );
    println!(
        "  native p50 {:>8.1} us   p99 {:>8.1} us",
        us(n50),
        us(pct(&native, 0.99))
    );
    println!("  ratio wasm/native (p50): {ratio:.2}  (target <= 1.5)");
    println!(
        "  wasm p50 target <= 50 us: {}",
        if us(w50) <= 50.0 { "met" } else { "NOT met" }
    );

    hostile_neighbour(&runtime, &guest, &request, &description);
}

/// The well-behaved guest's latency with a hostile guest loaded and busy
/// (an infinite loop cut by the 1 s deadline, over and over, on another
/// thread) against its latency alone. Target: p99 ratio <= 1.5.
fn hostile_neighbour(
    runtime: &Runtime,
    guest: &wasmop_host::runtime::Guest,
    request: &Request,
    description: &wasmop_host::model::Description,
) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let dir = guest_path().parent().expect("dir").to_path_buf();
    let hostile_bytes = std::fs::read(dir.join("hostile.wasm"))
        .expect("hostile.wasm; run cargo xtask build-guests");
    let (hostile, _) = runtime
        .load("hostile", &hostile_bytes, Limits::default())
        .expect("hostile loads");
    let limits = Limits::default();
    let scope = ParentScope {
        namespace: Some("default"),
    };
    let run = || {
        let raw = guest.reconcile(black_box(request)).expect("reconcile");
        black_box(validate("cache-operator", description, &limits, scope, raw).expect("valid"));
    };
    let alone = measure(run);
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = {
        let stop = stop.clone();
        let spin = Request {
            parent: json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
                "metadata": {"name": "spin", "namespace": "default", "uid": "u"}, "spec": {"attack": "loop"}}),
            observed: vec![],
            deleting: false,
        };
        std::thread::spawn(move || {
            let mut calls = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let _ = hostile.reconcile(&spin);
                calls += 1;
            }
            calls
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let busy = measure(run);
    stop.store(true, Ordering::Relaxed);
    let interrupted = attacker.join().expect("attacker thread");
    let ratio = pct(&busy, 0.99).as_secs_f64() / pct(&alone, 0.99).as_secs_f64();
    println!(
        "well-behaved guest next to a hostile one (endless loop cut at 1 s, {interrupted} calls interrupted)"
    );
    println!(
        "  alone        p50 {:>8.1} us   p99 {:>8.1} us",
        us(pct(&alone, 0.5)),
        us(pct(&alone, 0.99))
    );
    println!(
        "  hostile busy p50 {:>8.1} us   p99 {:>8.1} us",
        us(pct(&busy, 0.5)),
        us(pct(&busy, 0.99))
    );
    println!("  p99 ratio busy/alone: {ratio:.2}  (target <= 1.5)");
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
