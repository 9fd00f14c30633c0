//! Rollouts on the real control plane, N Caches (default 1,000,
//! `WASMOP_ROLLOUT_N`) converged under the cache-operator, measured side by
//! side in one run:
//! - `wasmop plan` of v2 over all of them (target ≤ 30 s at N = 1,000);
//! - the reconcile cost of shadow: every parent reconciled by a new
//!   version, then by that version with a shadow candidate beside it (the
//!   same logic under another digest, so every comparison is `same`), then
//!   by that version alone (a change of the entry's limits); p50 of the
//!   host's own reconcile time of each (target: with the shadow ≤ 1.2 ×
//!   alone), and the comparisons counted and skipped;
//! - the rollback: a canary of the broken build (10 % of the parents, the
//!   Deployments scaled to zero) fails its first step; the time from the
//!   host's abort to the last moved parent written back by the stable
//!   version (target ≤ 2 s at N = 1,000).
//!
//! Run with `cargo xtask bench rollout`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::json;
use support::{
    HostProcess, admin_identity, caches, guest_module, http_get, parse_prometheus, put_guest_list,
    put_module, sample,
};
use wasmop_testenv::TestEnv;

const LIST: &str = "wasmop-guests";
const CONVERGE_LIMIT: Duration = Duration::from_secs(900);

/// The same component with a custom section appended: the same logic under
/// a digest nobody has loaded yet.
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

async fn list(client: &kube::Client, ns: &str, cm: &str, rollout: &str) {
    list_with(client, ns, cm, "", rollout).await;
}

/// [`list`] with `fields` (`<key>: <value>` lines) in the entry.
async fn list_with(client: &kube::Client, ns: &str, cm: &str, fields: &str, rollout: &str) {
    put_guest_list(
        client,
        ns,
        LIST,
        &format!(
            "guests:\n  - name: cache-operator\n    module:\n      configMap: {{name: {cm}, key: module.wasm}}\n    namespaces: [{ns}]\n{fields}    rollout:\n      {rollout}"
        ),
    )
    .await
    .expect("guest list");
}

async fn wait_ready(api: &Api<DynamicObject>, n: usize) -> Duration {
    let started = Instant::now();
    loop {
        let items = api.list(&ListParams::default()).await.expect("list").items;
        let ready = items.iter().filter(|c| support::fleet::is_ready(c)).count();
        if ready == n {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < CONVERGE_LIMIT,
            "{ready} of {n} Caches Ready after {CONVERGE_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The `elapsed_us` of every "reconciled" line in `log` after byte `from`.
fn reconcile_times(log: &str, from: usize) -> Vec<u64> {
    log[from.min(log.len())..]
        .lines()
        .filter(|l| l.contains(": reconciled"))
        .filter_map(|l| {
            l.split("elapsed_us=")
                .nth(1)?
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

fn p50(mut samples: Vec<u64>) -> f64 {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or(0) as f64 / 1000.0
}

/// Waits until `n` more reconciles than `before` were logged since `from`.
async fn reconciled(host: &mut HostProcess, from: usize, n: usize) -> Vec<u64> {
    let started = Instant::now();
    loop {
        let times = reconcile_times(&host.log(), from);
        if times.len() >= n {
            return times;
        }
        assert!(
            started.elapsed() < CONVERGE_LIMIT,
            "{} of {n} reconciles after {CONVERGE_LIMIT:?}",
            times.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The shadow comparisons counted as `same`, counted in all, and skipped,
/// once every reconcile is counted or skipped (or after a minute), and how
/// long that took.
async fn shadow_counts(host: &mut HostProcess, n: usize) -> (u64, u64, u64, Duration) {
    let addr = host.endpoint("metrics").await.expect("metrics endpoint");
    let started = Instant::now();
    loop {
        let (_, body) = http_get(addr, "/metrics").await.expect("metrics");
        let metrics = parse_prometheus(&body).expect("metrics");
        let count = |family: &str, name: &str, labels: &[(&str, &str)]| {
            sample(&metrics, family, name, labels).unwrap_or(0.0) as u64
        };
        let guest = ("guest", "cache-operator");
        let compared: u64 = ["same", "different", "failed"]
            .iter()
            .map(|result| {
                count(
                    "wasmop_guest_shadow_reconciles",
                    "wasmop_guest_shadow_reconciles_total",
                    &[guest, ("result", result)],
                )
            })
            .sum();
        let skipped = count(
            "wasmop_guest_shadow_skipped",
            "wasmop_guest_shadow_skipped_total",
            &[guest],
        );
        if compared + skipped >= n as u64 || started.elapsed() > Duration::from_secs(60) {
            let same = count(
                "wasmop_guest_shadow_reconciles",
                "wasmop_guest_shadow_reconciles_total",
                &[guest, ("result", "same")],
            );
            return (same, compared, skipped, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The record's phase in the status ConfigMap.
async fn phase(client: &kube::Client, ns: &str) -> String {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
    let Ok(cm) = api.get(&format!("{LIST}-status")).await else {
        return String::new();
    };
    cm.data
        .and_then(|d| d.get("cache-operator").cloned())
        .and_then(|text| serde_saphyr::from_str::<serde_json::Value>(&text).ok())
        .and_then(|r| r["phase"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The time the host logged `needle` (its first line with it after `from`).
fn logged_at(log: &str, from: usize, needle: &str) -> Option<Timestamp> {
    log[from.min(log.len())..]
        .lines()
        .find(|l| l.contains(needle))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|t| t.parse().ok())
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("WASMOP_ROLLOUT_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let cpu = wasmop_testenv::cpu_model();
    println!(
        "\nrollout: N = {n} Caches, one host, one real control plane ({cpu}, {} cores)",
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    let env = TestEnv::start().await.expect("control plane");
    let client = env.client();
    support::install_cache_crd(&client).await.expect("CRD");
    let ns = env.create_namespace("rollout").await.expect("namespace");
    let v1 = std::fs::read(guest_module("cache-operator").expect("v1")).expect("v1");
    for (cm, module) in [
        ("cache-module", v1.clone()),
        ("cache-module-same", unique(&v1, 1)),
        ("cache-module-again", unique(&v1, 2)),
        (
            "cache-module-broken",
            std::fs::read(guest_module("cache-operator-broken").expect("broken")).expect("broken"),
        ),
    ] {
        put_module(&client, &ns, cm, "module.wasm", &module)
            .await
            .expect("module");
    }
    const IMMEDIATE: &str = "strategy: Immediate\n";
    list(&client, &ns, "cache-module", IMMEDIATE).await;
    let user = format!("wasmop-{ns}");
    let (_, kubeconfig) = admin_identity(&env, &user).await.expect("identity");
    let cache_dir = env.temp_dir().join("rollout-cache");
    let list_ref = format!("{ns}/{LIST}");
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        "rollout",
        &[
            "--guests-configmap",
            &list_ref,
            "--cache-dir",
            cache_dir.to_str().expect("utf-8"),
        ],
    )
    .expect("host");
    host.wait_for_log("started guest", CONVERGE_LIMIT)
        .await
        .expect("guest started");
    let api = caches(&client, &ns);
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let cache: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
                "metadata": {"name": format!("cache-{i}")},
                "spec": {"image": "redis:7.2", "replicas": 1},
            }))
            .expect("cache");
            async move { api.create(&PostParams::default(), &cache).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .expect("create caches");
    let converge = wait_ready(&api, n).await;
    println!("  {n} Caches Ready in {:.1} s", converge.as_secs_f64());

    // The plan of v2 over every Cache.
    let v2 = guest_module("cache-operator-v2").expect("v2");
    let guest = format!("cache-operator={}", v2.display());
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["plan", "--guest", &guest, "--namespace", &ns])
        .args(["--guests-configmap", &list_ref, "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--cache-dir", cache_dir.to_str().expect("utf-8")])
        .output()
        .expect("wasmop plan");
    let plan_time = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "plan: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "  wasmop plan of v2: {:.1} s for {n} Caches (target <= 30 s at N = 1,000: {}); {}",
        plan_time.as_secs_f64(),
        if plan_time <= Duration::from_secs(30) {
            "met"
        } else {
            "missed"
        },
        stdout.lines().last().unwrap_or_default()
    );

    // Every parent once by a new version, once with a shadow candidate
    // beside the same version, and once by the same version alone (a change
    // of the entry's limits reconciles every parent, and the version is not
    // new): the shadow is held to the pass that is like it but for the
    // candidate.
    let from = host.log().len();
    list(&client, &ns, "cache-module-same", IMMEDIATE).await;
    let plain = reconciled(&mut host, from, n).await;
    let from = host.log().len();
    list(&client, &ns, "cache-module-again", "strategy: Shadow\n").await;
    let shadowed = reconciled(&mut host, from, n).await;
    let (same, compared, skipped, drained) = shadow_counts(&mut host, n).await;
    let from = host.log().len();
    list_with(
        &client,
        &ns,
        "cache-module-same",
        "    maxEvents: 17\n",
        IMMEDIATE,
    )
    .await;
    let alone = reconciled(&mut host, from, n).await;
    let (new_p50, shadow_p50, alone_p50) = (
        p50(plain.clone()),
        p50(shadowed.clone()),
        p50(alone.clone()),
    );
    let ratio = shadow_p50 / alone_p50.max(f64::EPSILON);
    println!(
        "  reconcile p50, converged parents ({} reconciles each): a new version {new_p50:.3} ms; the same version with a shadow candidate {shadow_p50:.3} ms, alone {alone_p50:.3} ms: {ratio:.2}x (target <= 1.2x: {})",
        shadowed.len().min(plain.len()).min(alone.len()),
        if ratio <= 1.2 { "met" } else { "missed" }
    );
    println!(
        "  shadow comparisons: {compared} counted ({same} same), {skipped} skipped (queue full), {:.1} s after the last reconcile",
        drained.as_secs_f64()
    );

    // A canary of the broken build: its first step fails, and the host
    // moves every parent back.
    list(&client, &ns, "cache-module-same", IMMEDIATE).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let from = host.log().len();
    let canary_started = Timestamp::now();
    list(
        &client,
        &ns,
        "cache-module-broken",
        "strategy: Canary\n      steps: [10]\n      stepDuration: 10m\n      readyCondition: Available\n      progressDeadline: 5s\n",
    )
    .await;
    let started = Instant::now();
    while phase(&client, &ns).await != "Aborted" {
        assert!(started.elapsed() < CONVERGE_LIMIT, "never aborted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = host.log();
    let aborted = logged_at(&log, from, "aborted at step").expect("the abort in the log");
    // Moved parents: Deployments written by the host between the canary's
    // start and the abort (scaled to zero by the broken build).
    let mut moved: BTreeSet<String> = BTreeSet::new();
    let mut back: BTreeMap<String, Timestamp> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let writes = support::timed_successful_writes_by(&env, &user).expect("audit");
        for (at, (_, resource, _, name)) in &writes {
            if resource != "deployments" || *at < canary_started {
                continue;
            }
            if *at < aborted {
                moved.insert(name.clone());
            } else {
                back.entry(name.clone()).or_insert(*at);
            }
        }
        if !moved.is_empty() && moved.iter().all(|m| back.contains_key(m)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} moved parents back",
            back.len(),
            moved.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let last = moved
        .iter()
        .filter_map(|m| back.get(m))
        .max()
        .copied()
        .expect("a moved parent");
    let rollback = last.duration_since(aborted);
    let rollback = Duration::try_from(rollback).unwrap_or_default();
    println!(
        "  rollback: {} moved parents back on the stable version {:.2} s after the abort (target <= 2 s at N = 1,000: {})",
        moved.len(),
        rollback.as_secs_f64(),
        if rollback <= Duration::from_secs(2) {
            "met"
        } else {
            "missed"
        }
    );
    host.stop();
    env.shutdown();
}
