//! Fair share on the real control plane: two guests on one host, one of
//! them handed a burst of parents at once, the other's user changes
//! measured throughout. Each probe changes the spec of the steady guest's
//! parent and waits until the host wrote that generation back
//! (`status.observedGeneration`). Printed side by side in one run: the
//! steady guest's latency alone, then while the other guest converges its
//! burst. Target: p99 <= 1 s throughout the burst. Run with
//! `cargo xtask bench fairness` (`WASMOP_FAIRNESS_N`, default 2000).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use wasmop_testenv::TestEnv;

/// Parents created at once in the bench's burst.
const DEFAULT_N: usize = 2000;
/// Concurrent creators of the burst.
const CREATORS: usize = 16;
/// How often the steady guest's parent is changed during the burst.
const PROBE_EVERY: Duration = Duration::from_millis(250);

fn guests_dir() -> PathBuf {
    std::env::var_os("WASMOP_GUESTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/guests"))
}

fn kind_api(client: &Client, ns: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("test.wasmop.dev", "v1alpha1", kind),
        plural,
    );
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Changes the probe's spec and returns how long until the host wrote that
/// generation back.
async fn probe(steady: &Api<DynamicObject>, round: usize) -> Duration {
    let started = Instant::now();
    let changed = steady
        .patch(
            "probe",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"target": format!("round-{round}")}})),
        )
        .await
        .expect("change the probe");
    let generation = changed.metadata.generation.expect("a generation");
    loop {
        let probe = steady.get("probe").await.expect("the probe");
        if probe.data.pointer("/status/observedGeneration") == Some(&json!(generation)) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "generation {generation} of the probe was never reconciled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn summary(label: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p99 = percentile(&samples, 0.99);
    println!(
        "  {label:<28} {:>5} changes   p50 {:>7.1} ms   p99 {:>7.1} ms   max {:>7.1} ms",
        samples.len(),
        ms(percentile(&samples, 0.5)),
        ms(p99),
        ms(samples.last().copied().unwrap_or_default()),
    );
    p99
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("WASMOP_FAIRNESS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_N);
    let env = TestEnv::start().await.expect("control plane");
    let client = env.client();
    let crds = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guests/hostile/crd.yaml"),
    )
    .expect("the hostile CRDs");
    for crd in serde_saphyr::from_multiple::<serde_json::Value>(&crds).expect("YAML") {
        if crd.is_null() {
            continue;
        }
        let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("a CRD");
        wasmop_testenv::crd::install(&client, &crd)
            .await
            .expect("CRD");
    }
    let ns = env.create_namespace("fairness").await.expect("namespace");
    let module =
        std::fs::read(guests_dir().join("hostile.wasm")).expect("target/guests/hostile.wasm");
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let put = |name: &str, cm: ConfigMap| {
        let configs = configs.clone();
        let name = name.to_owned();
        async move {
            configs
                .patch(
                    &name,
                    &PatchParams::apply("bench").force(),
                    &Patch::Apply(&cm),
                )
                .await
                .expect("ConfigMap");
        }
    };
    put(
        "hostile-module",
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("hostile-module".into()),
                ..ObjectMeta::default()
            },
            binary_data: Some([("module.wasm".to_owned(), ByteString(module))].into()),
            ..ConfigMap::default()
        },
    )
    .await;
    let entry = |name: &str, settings: &str| {
        format!(
            "  - name: {name}\n    module:\n      configMap: {{name: hostile-module, key: module.wasm}}\n    namespaces: [{ns}]\n    settings: {settings}\n"
        )
    };
    let list = format!(
        "guests:\n{}{}",
        entry("burst", "{}"),
        entry("steady", "{primary: HostileTwin}")
    );
    put(
        "wasmop-guests",
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("wasmop-guests".into()),
                ..ObjectMeta::default()
            },
            data: Some([("guests.yaml".to_owned(), list)].into()),
            ..ConfigMap::default()
        },
    )
    .await;
    let log = env.temp_dir().join("wasmop-fairness.log");
    let mut host = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["run", "--guests-configmap", &format!("{ns}/wasmop-guests")])
        .args([
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        ])
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .env("WASMOP_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("wasmop");

    let steady = kind_api(&client, &ns, "HostileTwin", "hostiletwins");
    let burst = kind_api(&client, &ns, "Hostile", "hostiles");
    let parent = |kind: &str, name: String| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "test.wasmop.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name}, "spec": {"attack": "none"},
        }))
        .expect("a parent")
    };
    steady
        .create(
            &PostParams::default(),
            &parent("HostileTwin", "probe".into()),
        )
        .await
        .expect("the probe");
    // The first reconcile waits for the guests to load and their caches.
    probe(&steady, 0).await;

    let mut alone = Vec::new();
    for round in 1..=40 {
        alone.push(probe(&steady, round).await);
        tokio::time::sleep(PROBE_EVERY).await;
    }

    // The burst: n parents of the other guest, created as fast as the API
    // server takes them, while the probe keeps changing.
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let creators: Vec<_> = (0..CREATORS)
        .map(|_| {
            let (burst, next) = (burst.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let obj = parent("Hostile", format!("b{i}"));
                    burst
                        .create(&PostParams::default(), &obj)
                        .await
                        .expect("a parent of the burst");
                }
            })
        })
        .collect();
    let converged = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (burst, converged) = (burst.clone(), converged.clone());
        tokio::spawn(async move {
            loop {
                let list = burst.list(&Default::default()).await.expect("list");
                let done = list
                    .items
                    .iter()
                    .filter(|o| o.data.pointer("/status/ok") == Some(&json!(true)))
                    .count();
                if done == n {
                    converged.store(true, Ordering::Relaxed);
                    return started.elapsed();
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let mut during = Vec::new();
    let mut round = 100;
    while !converged.load(Ordering::Relaxed) {
        during.push(probe(&steady, round).await);
        round += 1;
        tokio::time::sleep(PROBE_EVERY).await;
    }
    for creator in creators {
        creator.await.expect("creator");
    }
    let burst_time = watcher.await.expect("watcher");

    println!(
        "\nfairness: two guests on one host, one real control plane ({}, {} cores)",
        wasmop_testenv::cpu_model(),
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    println!(
        "  the other guest's burst: {n} parents created at once, converged in {:.1} s",
        burst_time.as_secs_f64()
    );
    println!("  the steady guest's user changes, each until its generation is written back:");
    summary("alone", alone);
    let p99 = summary(&format!("during the burst of {n}"), during);
    println!(
        "  target: p99 <= 1000 ms during the burst: {}",
        if p99 <= Duration::from_secs(1) {
            "met"
        } else {
            "MISSED"
        }
    );
    println!(
        "  on 2 cores the control plane, the burst's creators and the host share the CPU: the API server's own latency is part of every figure"
    );
    let _ = host.kill();
    let _ = host.wait();
}
