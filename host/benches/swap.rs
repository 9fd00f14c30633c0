//! Hot-swap latency on the real control plane: the time from updating the
//! module ConfigMap to the first reconcile on the new version being visible
//! (the Deployment's `apps.example.com/version` label flips), for a never-seen
//! module (cold compile) and for a version the host has compiled before
//! (cache hit). Target: p50 <= 1 s. Also prints in-process cold compile vs
//! cache hit. Run with `cargo xtask bench` (builds guests and binaries).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmop_host::runtime::{Runtime, RuntimeConfig};
use wasmop_host::source::oci;
use wasmop_testenv::{Registry, TestEnv};

const SWAPS: usize = 10;

fn guests_dir() -> PathBuf {
    std::env::var_os("WASMOP_GUESTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/guests"))
}

/// The same component with a custom section appended: a valid module with
/// a digest nobody has compiled yet.
fn unique(module: &[u8], n: usize) -> Vec<u8> {
    use wasm_encoder::{ComponentSection, CustomSection};
    let mut out = module.to_vec();
    CustomSection {
        name: "wasmop-bench".into(),
        data: n.to_le_bytes().to_vec().into(),
    }
    .append_to_component(&mut out);
    out
}

async fn put_module(client: &Client, ns: &str, module: &[u8]) {
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("module".into()),
            ..Default::default()
        },
        binary_data: Some([("module.wasm".to_string(), ByteString(module.to_vec()))].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .patch(
            "module",
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&cm),
        )
        .await
        .expect("module ConfigMap");
}

async fn is_v2(deployments: &Api<Deployment>) -> Option<bool> {
    let d = deployments.get_opt("bench").await.ok()??;
    Some(
        d.labels()
            .get("apps.example.com/version")
            .map(String::as_str)
            == Some("v2"),
    )
}

fn summary(label: &str, mut samples: Vec<Duration>, target_ms: f64) {
    samples.sort();
    let p = |q: f64| {
        samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0
    };
    println!(
        "  {label:<28} p50 {:>7.1} ms   max {:>7.1} ms   (target p50 <= {target_ms} ms: {})",
        p(0.5),
        p(1.0),
        if p(0.5) <= target_ms {
            "met"
        } else {
            "NOT met"
        }
    );
}

#[tokio::main]
async fn main() {
    let dir = guests_dir();
    let v1 = std::fs::read(dir.join("cache-operator.wasm"))
        .expect("cache-operator.wasm; run cargo xtask build-guests");
    let v2 = std::fs::read(dir.join("cache-operator-v2.wasm")).expect("cache-operator-v2.wasm");

    // In-process: cold compile vs cache hit.
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let t = Instant::now();
    let v1_module = wasmop_host::runtime::ModuleBytes::new(v1.clone());
    runtime.cache().get_or_compile(&v1_module).expect("compile");
    let cold = t.elapsed();
    let t = Instant::now();
    runtime.cache().get_or_compile(&v1_module).expect("hit");
    let hit = t.elapsed();
    println!(
        "compiled-module cache: cold compile {:.1} ms, cache hit {:.3} ms ({}x faster)",
        cold.as_secs_f64() * 1e3,
        hit.as_secs_f64() * 1e3,
        (cold.as_secs_f64() / hit.as_secs_f64()) as u64
    );

    let env = TestEnv::start().await.expect("control plane");
    let client = env.client();
    let crd: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds/cache.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    // v1alpha1 alone: this host serves no conversion webhook.
    let crd = wasmop_testenv::crd::single_version(crd, "v1alpha1").unwrap();
    wasmop_testenv::crd::install(&client, &serde_json::from_value(crd).expect("a CRD"))
        .await
        .expect("crd");
    let ns = env.create_namespace("swap-bench").await.expect("namespace");
    put_module(&client, &ns, &v1).await;
    let list = format!(
        "guests:\n  - name: cache-operator\n    module:\n      configMap: {{name: module, key: module.wasm}}\n    namespaces: [{ns}]\n"
    );
    let (mut host, log) = start_host(&env, &ns, &list, "bench-host.log").await;
    let deployments = first_reconcile(&client, &ns, &log).await;

    let mut state_v2 = false;
    let swap = async |module: &[u8], want_v2: bool| -> Duration {
        let started = Instant::now();
        put_module(&client, &ns, module).await;
        flipped(&deployments, want_v2, started, &log).await
    };
    let mut cold_samples = Vec::new();
    for i in 0..SWAPS {
        state_v2 = !state_v2;
        let base = if state_v2 { &v2 } else { &v1 };
        cold_samples.push(swap(&unique(base, i), state_v2).await);
    }
    let mut warm_samples = Vec::new();
    for _ in 0..SWAPS {
        state_v2 = !state_v2;
        warm_samples.push(swap(if state_v2 { &v2 } else { &v1 }, state_v2).await);
    }
    println!(
        "ConfigMap update -> first reconcile on the new version ({SWAPS} swaps each, real control plane):"
    );
    summary("new module (cold compile)", cold_samples, 1000.0);
    summary("known module (cache hit)", warm_samples, 1000.0);
    let _ = host.kill();
    let _ = host.wait();

    oci_swaps(&env, &v1, &v2).await;
}

/// Waits until the Deployment `bench` shows `want_v2`; the time since
/// `started`.
async fn flipped(
    deployments: &Api<Deployment>,
    want_v2: bool,
    started: Instant,
    log: &std::path::Path,
) -> Duration {
    loop {
        if is_v2(deployments).await == Some(want_v2) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "swap never took effect; see {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Creates the Cache `bench` in `ns` and waits for the host's first
/// reconcile of it (a v1 Deployment).
async fn first_reconcile(client: &Client, ns: &str, log: &std::path::Path) -> Api<Deployment> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps.example.com", "v1alpha1", "Cache"),
        "caches",
    );
    let caches: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let cache = serde_json::from_value(json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache", "metadata": {"name": "bench"}, "spec": {"image": "redis:7.2"}})).unwrap();
    caches
        .create(&PostParams::default(), &cache)
        .await
        .expect("cache");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    flipped(&deployments, false, Instant::now(), log).await;
    deployments
}

/// Creates the guest list `guests` in `ns` and starts a host following it,
/// logging to `log` in the env's directory (returned).
async fn start_host(
    env: &TestEnv,
    ns: &str,
    list: &str,
    log: &str,
) -> (std::process::Child, PathBuf) {
    let log = env.temp_dir().join(log);
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("guests".into()),
            ..Default::default()
        },
        data: Some([("guests.yaml".to_string(), list.to_owned())].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(env.client(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .expect("list");
    let child = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args([
            "run",
            "--guests-configmap",
            &format!("{ns}/guests"),
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            "--kubeconfig",
        ])
        .arg(env.kubeconfig_path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("wasmop");
    (child, log)
}

/// The same swaps through an OCI tag on a real registry.
async fn oci_swaps(env: &TestEnv, v1: &[u8], v2: &[u8]) {
    const POLL_SECS: u64 = 1;
    let registry = Registry::start(None).await.expect("registry");
    let text = format!("{}/bench/cache-operator:stable", registry.address());
    let reference = oci::parse_reference(&text).expect("reference");
    let client = oci::Registry::new(
        &reference,
        true,
        oci_client::secrets::RegistryAuth::Anonymous,
    );
    client.push(&reference, v1.to_vec()).await.expect("push v1");
    let ns = env
        .create_namespace("oci-swap-bench")
        .await
        .expect("namespace");
    let list = format!(
        "guests:\n  - name: cache-operator\n    module: {{oci: \"{text}\"}}\n    insecure: true\n    ociPollInterval: {POLL_SECS}s\n    namespaces: [{ns}]\n"
    );
    let (mut host, log) = start_host(env, &ns, &list, "bench-oci-host.log").await;
    let deployments = first_reconcile(&env.client(), &ns, &log).await;

    let mut state_v2 = false;
    let mut samples = Vec::new();
    for i in 0..SWAPS {
        state_v2 = !state_v2;
        let module = unique(if state_v2 { v2 } else { v1 }, 1000 + i);
        client.push(&reference, module).await.expect("push");
        samples.push(flipped(&deployments, state_v2, Instant::now(), &log).await);
    }
    println!(
        "OCI push to the followed tag -> first reconcile on the new version ({SWAPS} swaps, ociPollInterval {POLL_SECS}s, real registry):"
    );
    // The poll interval bounds the wait; the rest is the ConfigMap path's.
    summary(
        "new module by tag (poll)",
        samples,
        (POLL_SECS * 1000 + 1000) as f64,
    );
    let _ = host.kill();
    let _ = host.wait();
}
