//! Metacontroller's controllers on wasmop: the StatefulSet-like PetSet of
//! `guests/metacontroller/petset` (a CompositeController, RollingRecreate,
//! a finalize hook) built by `wasmop metacontroller build` with its
//! JavaScript hook (`hooks/sync.js`) and with the same logic in Python
//! (`hooks-py/sync.py`), and the same logic as a Rust guest
//! (`guest-rust`, `target/guests/petset.wasm`). For each, on the real
//! control plane:
//!
//! 1. N PetSets of one Pod each created at once; the wall time until every
//!    one shows `readyReplicas: 1` (kwok plays the kubelet), and the host's
//!    CPU seconds and peak RSS meanwhile;
//! 2. converged: the host's writes in a quiet window (target: none);
//! 3. in-process: the per-call cost of the hook on a PetSet with one Ready
//!    Pod (p50 and p99 of `reconcile`, each call in a fresh instance, as
//!    the host calls it), and the resident memory one loaded controller
//!    and 20 add once the module is compiled (the same module under 20
//!    names, as 20 controllers would be; the compiled code is shared).
//!
//! One table, the Rust guest, the JavaScript and the Python hooks side by
//! side, each hook's time to Ready against the Rust guest's (target: within
//! 1.2×).
//!
//! `cargo xtask bench metacontroller`; `WASMOP_MC_N` (default 1000) and
//! `WASMOP_MC_QUIET_SECS` (default 30) choose others.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use wasmop_host::model::Request;
use wasmop_host::runtime::{Limits, ModuleBytes, Runtime, RuntimeConfig};
use wasmop_testenv::TestEnv;

/// How long one convergence may take before the bench gives up.
const CONVERGE_LIMIT: Duration = Duration::from_secs(1800);
/// Calls measured per hook in-process.
const CALLS: usize = 200;

fn env_number(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .map(|v| v.trim().parse().expect("a number"))
        .unwrap_or(default)
}

fn petset_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/metacontroller/petset")
}

fn petsets(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("mc.example.com", "v1", "PetSet"),
        "petsets",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn petset(name: &str, namespace: &str) -> Value {
    json!({
        "apiVersion": "mc.example.com/v1", "kind": "PetSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
    })
}

/// One hook's figures.
#[derive(Default)]
struct Figures {
    ready_secs: f64,
    host_cpu_secs: f64,
    host_peak_mib: f64,
    quiet_writes: usize,
    call_p50_ms: f64,
    call_p99_ms: f64,
    one_loaded_mib: f64,
    twenty_loaded_mib: f64,
}

/// What runs the PetSet's logic.
#[derive(Clone, Copy, PartialEq)]
enum Logic {
    /// The Rust guest, `target/guests/petset.wasm`.
    Rust,
    /// The hook files of this folder of the controller, built with
    /// `wasmop metacontroller build`.
    Hooks(&'static str),
}

impl Logic {
    fn label(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Hooks(hooks) => hooks,
        }
    }
}

fn build(kubeconfig: &Path, hooks: &str, out: &Path) {
    let dir = petset_dir();
    let status = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["metacontroller", "build"])
        .arg(dir.join("controller.yaml"))
        .arg("--hooks")
        .arg(dir.join(hooks))
        .arg("-o")
        .arg(out)
        .env("KUBECONFIG", kubeconfig)
        .status()
        .expect("wasmop metacontroller build");
    assert!(
        status.success(),
        "wasmop metacontroller build --hooks {hooks} failed"
    );
}

fn rss_kib() -> u64 {
    wasmop_testenv::cost(std::process::id()).rss_kib
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// The per-call cost of `module` on a PetSet with one Ready Pod, and the
/// resident memory of 1 and of 20 loaded copies.
fn in_process(module: &Path, figures: &mut Figures) {
    let bytes = ModuleBytes::new(std::fs::read(module).expect("the module"));
    let runtime = Runtime::new(RuntimeConfig::default()).expect("a runtime");
    // Compiled once (the runtime keeps the artifact, as the host does) and
    // called once, so that what follows is what each loaded controller adds.
    let (warm, _) = runtime
        .load("petset-warm", &bytes, Limits::default(), None)
        .expect("the module loads");
    drop(warm);
    let before = rss_kib();
    let guests: Vec<_> = (0..20)
        .map(|i| {
            let (guest, _) = runtime
                .load(&format!("petset-{i}"), &bytes, Limits::default(), None)
                .expect("the module loads");
            if i == 0 {
                figures.one_loaded_mib = (rss_kib().saturating_sub(before)) as f64 / 1024.0;
            }
            guest
        })
        .collect();
    figures.twenty_loaded_mib = (rss_kib().saturating_sub(before)) as f64 / 1024.0;
    // The Pod the logic asks for first, as the cluster shows it once Ready.
    let first = guests[0]
        .reconcile(&Request::of(petset("web", "bench")))
        .expect("the first answer");
    let mut pod: Value = serde_json::from_str(&first.children[0]).expect("a Pod");
    pod["metadata"]["namespace"] = json!("bench");
    pod["status"] =
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    let request = Request::of(petset("web", "bench")).observing(vec![pod]);
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let answer = guests[0].reconcile(&request).expect("the hook answers");
        times.push(started.elapsed());
        assert_eq!(answer.children.len(), 1);
    }
    times.sort();
    figures.call_p50_ms = percentile(&times, 0.5);
    figures.call_p99_ms = percentile(&times, 0.99);
}

async fn converge(env: &TestEnv, logic: Logic, n: usize, quiet: Duration) -> Figures {
    let client = env.client();
    let hooks = logic.label();
    let ns = env
        .create_namespace(&format!("bench-{}", hooks.replace('-', "")))
        .await
        .expect("a namespace");
    let user = format!("wasmop-{ns}");
    let (_, kubeconfig) = support::admin_identity(env, &user)
        .await
        .expect("an identity");
    let module = match logic {
        Logic::Rust => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/guests/petset.wasm"),
        Logic::Hooks(hooks) => {
            let module = env.temp_dir().join(format!("{ns}.wasm"));
            build(&kubeconfig, hooks, &module);
            module
        }
    };
    // A guest that imports WASI is called on a runtime of its own: off
    // this one's threads.
    let measured = module.clone();
    let mut figures = tokio::task::spawn_blocking(move || {
        let mut figures = Figures::default();
        in_process(&measured, &mut figures);
        figures
    })
    .await
    .expect("the in-process calls");
    let guest = format!("petset={}", module.display());
    let mut host = support::HostProcess::start(
        env,
        &kubeconfig,
        &ns,
        &["--guest", &guest, "--namespace", &ns],
    )
    .expect("the host starts");
    host.wait_for_log("controller started", Duration::from_secs(120))
        .await
        .expect("the controller starts");
    let api = petsets(&client, &ns);
    let started = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            let ns = ns.clone();
            async move {
                let object: DynamicObject =
                    serde_json::from_value(petset(&format!("web-{i}"), &ns)).expect("a PetSet");
                api.create(&PostParams::default(), &object)
                    .await
                    .expect("created");
            }
        })
        .await;
    loop {
        let list = api.list(&ListParams::default()).await.expect("a list");
        let ready = list
            .items
            .iter()
            .filter(|p| p.data.pointer("/status/readyReplicas") == Some(&json!(1)))
            .count();
        if ready == n {
            break;
        }
        assert!(
            started.elapsed() < CONVERGE_LIMIT,
            "{hooks}: {ready} of {n} ready after {CONVERGE_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    figures.ready_secs = started.elapsed().as_secs_f64();
    let cost = wasmop_testenv::cost(host.pid());
    figures.host_cpu_secs = cost.cpu_seconds;
    figures.host_peak_mib = cost.peak_kib as f64 / 1024.0;
    // Settle, then count the host's writes in a quiet window.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = env.count_writes_by(&user).expect("the audit log");
    tokio::time::sleep(quiet).await;
    figures.quiet_writes = env.count_writes_by(&user).expect("the audit log") - before;
    host.stop();
    figures
}

fn main() {
    let n = env_number("WASMOP_MC_N", 1000) as usize;
    let quiet = Duration::from_secs(env_number("WASMOP_MC_QUIET_SECS", 30));
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let all = rt.block_on(async {
        let env = TestEnv::start().await.expect("a control plane");
        support::install_yaml(&env.client(), &petset_dir().join("crd.yaml"))
            .await
            .expect("the PetSet CRD");
        let mut all = Vec::new();
        for logic in [Logic::Rust, Logic::Hooks("hooks"), Logic::Hooks("hooks-py")] {
            all.push(converge(&env, logic, n, quiet).await);
        }
        env.shutdown();
        all
    });
    let [rust, js, py] = <[Figures; 3]>::try_from(all).ok().expect("three runs");
    let machine = wasmop_testenv::cpu_model();
    println!();
    println!("metacontroller: the PetSet controller, N = {n} PetSets of one Pod, on {machine}");
    println!("| | Rust guest | JavaScript hook | Python hook |");
    println!("| --- | --- | --- | --- |");
    let row = |what: &str, f: &dyn Fn(&Figures) -> String| {
        println!("| {what} | {} | {} | {} |", f(&rust), f(&js), f(&py));
    };
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    row("all Ready (target: within 1.2x the Rust guest's)", &|f| {
        let ratio = f.ready_secs / rust.ready_secs;
        format!("{:.1} s ({ratio:.2}x, {})", f.ready_secs, met(ratio <= 1.2))
    });
    row("host CPU until Ready", &|f| {
        format!(
            "{:.1} s ({:.2}x)",
            f.host_cpu_secs,
            f.host_cpu_secs / rust.host_cpu_secs
        )
    });
    row("host peak RSS", &|f| format!("{:.0} MiB", f.host_peak_mib));
    row(
        &format!(
            "host writes in {} s once converged (target 0)",
            quiet.as_secs()
        ),
        &|f| format!("{} ({})", f.quiet_writes, met(f.quiet_writes == 0)),
    );
    row("per call p50 / p99 (in-process)", &|f| {
        format!("{:.2} / {:.2} ms", f.call_p50_ms, f.call_p99_ms)
    });
    row(
        "resident memory each loaded controller adds: 1 / 20 (compiled code shared)",
        &|f| format!("{:.1} / {:.1} MiB", f.one_loaded_mib, f.twenty_loaded_mib),
    );
}
