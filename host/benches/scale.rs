//! Scale, against the operator a user would otherwise write: the seeds'
//! controller-runtime Cache operator as their chapter 3 writes it
//! (`tests/peers/kubebuilder-cache`, "peer ch.3") and as their stages 4
//! and 5 finish it (`tests/peers/kubebuilder-cache-finished`, "peer
//! finished": finalizer and cleanup, conditions, Events, the ConfigMap, per
//! Cache what the cache-operator does), one process per CRD group, against
//! one wasmop host running the cache-operator guest. On one real control
//! plane, one operator at a time, each in a fresh namespace (its own CRD
//! group for the density runs), deleted once measured so that the next one
//! starts in an empty cluster:
//!
//! 1. convergence: N Caches created by the user's own `kubectl apply -f`
//!    of one file (kubectl sends them one after another); how long that
//!    apply took beside the operator, and the wall time until every one is
//!    Ready at its generation; the operator's API requests by verb (audit
//!    log); each control-plane component's CPU seconds (`/proc`);
//! 2. steady state: 60 s without changes, then a no-op storm (every Cache
//!    annotated once): the operator's writes in each window;
//! 3. cost: peak and steady RSS and CPU seconds of the operator's process;
//! 4. density: M operators (M CRD groups) idle, total RSS and RSS per extra
//!    operator;
//! 5. fairness: a Cache created and converged before the burst has its spec
//!    changed a second into the user's apply; how long until its status
//!    shows the new generation while the N others converge;
//! 6. deletion: every Cache deleted at once (the operator still running);
//!    time until none is left, the operator's requests by verb (audit log)
//!    and each control-plane component's CPU seconds meanwhile;
//!
//! and the floor: the same N Deployments, Services and ConfigMaps applied
//! with no operator, until every Deployment is available, with the CPU
//! seconds each control-plane component used in it, then every Deployment
//! scaled to zero until none has a pod (the cleanup the finalizers of the
//! cache-operator and the finished peer wait for). One table, with each
//! operator's figure and wasmop / peer for both peers.
//!
//! `cargo xtask bench scale`; `WASMOP_SCALE_N=100,1000,5000`,
//! `WASMOP_SCALE_M=1,5,20` and `WASMOP_SCALE_STEADY_SECS=60` choose others;
//! `WASMOP_SCALE_OPERATORS` names the operators measured (default
//! `wasmop,kubebuilder,kubebuilder-finished`; `wasmop` alone is a profile
//! run, and the table then has no ratios). `WASMOP_SCALE_GUEST=tutorial-cache`
//! runs the host with the guest that has the peer's logic (no ConfigMap,
//! finalizer or Events) instead of the cache-operator: the host alone
//! against controller-runtime, the same writes asked of both.
//! `WASMOP_SCALE_HOST=<path>` runs another `wasmop` binary (the image's,
//! `target/x86_64-unknown-linux-musl/dist/wasmop`) instead of the bench's
//! release build, and `WASMOP_SCALE_CONCURRENCY` passes `--concurrency`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use wasmop_testenv::TestEnv;

/// How long one convergence may take before the bench gives up.
const CONVERGE_LIMIT: Duration = Duration::from_secs(1800);

fn env_list(var: &str, default: &str) -> Vec<usize> {
    std::env::var(var)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|n| n.trim().parse().expect("a list of numbers"))
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    Wasmop,
    /// The seeds' chapter-3 operator (`tests/peers/kubebuilder-cache`).
    Peer,
    /// The seeds' operator as stages 4 and 5 finish it
    /// (`tests/peers/kubebuilder-cache-finished`).
    Finished,
}

impl Operator {
    const ALL: [Self; 3] = [Self::Wasmop, Self::Peer, Self::Finished];

    /// Its name in `WASMOP_SCALE_OPERATORS`, identities and namespaces.
    fn name(self) -> &'static str {
        match self {
            Self::Wasmop => "wasmop",
            Self::Peer => "kubebuilder",
            Self::Finished => "kubebuilder-finished",
        }
    }

    /// Its column in the table.
    fn label(self) -> &'static str {
        match self {
            Self::Wasmop => "wasmop",
            Self::Peer => "peer ch.3",
            Self::Finished => "peer finished",
        }
    }
}

/// The guest wasmop runs: `WASMOP_SCALE_GUEST`, the cache-operator by
/// default.
fn guest() -> String {
    std::env::var("WASMOP_SCALE_GUEST").unwrap_or_else(|_| "cache-operator".to_owned())
}

/// The `wasmop` binary run: `WASMOP_SCALE_HOST`, the bench's own release
/// build by default.
fn host_binary() -> std::path::PathBuf {
    std::env::var_os("WASMOP_SCALE_HOST")
        .map_or_else(|| env!("CARGO_BIN_EXE_wasmop").into(), Into::into)
}

/// The CRD group of density slot `i` (slot 0 is the seeds' own group).
fn group(i: usize) -> String {
    if i == 0 {
        "apps.example.com".to_owned()
    } else {
        format!("g{i}.example.com")
    }
}

fn caches(client: &Client, ns: &str, group: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, "v1alpha1", "Cache"),
        "caches",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// Installs the Cache CRD under `group`, its v1alpha1 version alone (the
/// peer and the bench's hosts serve no conversion).
async fn install_crd(client: &Client, group: &str) {
    support::install_cache_crd_in(client, group)
        .await
        .expect("crd");
}

/// A process under measurement, with the identity its requests carry.
struct Running {
    child: Child,
    user: String,
    /// Where its Prometheus metrics are served (the first process only).
    metrics: Option<SocketAddr>,
}

/// A free local address to serve metrics on.
fn free_address() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

/// Busy and total CPU time of the whole machine so far (clock ticks, from
/// /proc/stat): the control plane, the operator and the bench share it.
fn machine_cpu() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .expect("cpu line")
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let idle = ticks[3] + ticks.get(4).copied().unwrap_or(0);
    let total: u64 = ticks.iter().take(8).sum();
    (total - idle, total)
}

/// The counters of a process's metrics the bench reads (both operators
/// serve them under controller-runtime's names).
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    /// `controller_runtime_reconcile_total`, over all labels.
    reconciles: f64,
    /// `controller_runtime_reconcile_time_seconds_sum`.
    reconcile_secs: f64,
    /// `workqueue_queue_duration_seconds_sum` and `_count`.
    queued_secs: f64,
    queued: f64,
}

impl std::ops::Sub for Counters {
    type Output = Self;
    fn sub(self, before: Self) -> Self {
        Self {
            reconciles: self.reconciles - before.reconciles,
            reconcile_secs: self.reconcile_secs - before.reconcile_secs,
            queued_secs: self.queued_secs - before.queued_secs,
            queued: self.queued - before.queued,
        }
    }
}

async fn counters(metrics: SocketAddr) -> Counters {
    let (code, text) = support::http_get(metrics, "/metrics")
        .await
        .expect("metrics");
    assert_eq!(code, 200, "/metrics answered {code}: {text}");
    let sum = |name: &str| -> f64 {
        text.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with(['{', ' ']))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    Counters {
        reconciles: sum("controller_runtime_reconcile_total"),
        reconcile_secs: sum("controller_runtime_reconcile_time_seconds_sum"),
        queued_secs: sum("workqueue_queue_duration_seconds_sum"),
        queued: sum("workqueue_queue_duration_seconds_count"),
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `operator` for the Caches of `groups` in `ns` (all namespaces
/// when `ns` is empty): one wasmop host with a guest per group, or one peer
/// process per group.
async fn start(
    env: &TestEnv,
    operator: Operator,
    groups: &[String],
    ns: &str,
    tag: &str,
) -> Vec<Running> {
    let user = format!("{}-{tag}", operator.name());
    let (_, kubeconfig) = env
        .user_kubeconfig(&user, &["system:masters"])
        .await
        .expect("identity");
    let log = |suffix: &str| {
        std::fs::File::create(env.temp_dir().join(format!("{user}{suffix}.log"))).expect("log")
    };
    match operator {
        Operator::Wasmop => {
            let module = support::guest_module(&guest()).expect("guest");
            let mut command = Command::new(host_binary());
            command.args(["run", "--kubeconfig"]).arg(&kubeconfig);
            for (i, g) in groups.iter().enumerate() {
                let name = format!("cache-{i}");
                command
                    .arg("--guest")
                    .arg(format!("{name}={}", module.display()));
                if i > 0 {
                    let settings = env.temp_dir().join(format!("{user}-{name}.yaml"));
                    std::fs::write(&settings, format!("apiGroup: {g}\n")).expect("settings");
                    command
                        .arg("--settings")
                        .arg(format!("{name}={}", settings.display()));
                }
            }
            if !ns.is_empty() {
                command.args(["--namespace", ns]);
            }
            if let Ok(concurrency) = std::env::var("WASMOP_SCALE_CONCURRENCY") {
                command.args(["--concurrency", &concurrency]);
            }
            let metrics = free_address();
            let child = command
                .args(["--metrics-bind-address", &metrics.to_string()])
                .args(["--health-probe-bind-address", "0"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log(""))
                .spawn()
                .expect("wasmop");
            vec![Running {
                child,
                user,
                metrics: Some(metrics),
            }]
        }
        Operator::Peer | Operator::Finished => {
            let binary = peer_binary(operator);
            groups
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let metrics = (i == 0).then(free_address);
                    let bind = metrics.map_or_else(|| "0".to_owned(), |a| a.to_string());
                    let child = Command::new(&binary)
                        .args(["--group", g, "--namespace", ns])
                        .args(["--metrics-bind-address", &bind])
                        .env("KUBECONFIG", &kubeconfig)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(log(&format!("-{i}")))
                        .spawn()
                        .expect("peer");
                    Running {
                        child,
                        user: user.clone(),
                        metrics,
                    }
                })
                .collect()
        }
    }
}

/// The binary of a peer, built if missing.
fn peer_binary(operator: Operator) -> std::path::PathBuf {
    match operator {
        Operator::Peer => wasmop_testenv::ensure_kubebuilder_cache(),
        Operator::Finished => wasmop_testenv::ensure_kubebuilder_cache_finished(),
        Operator::Wasmop => unreachable!("wasmop is no peer"),
    }
    .expect("peer build")
}

/// Resident and peak memory (KiB), CPU seconds of `pid`.
fn cost(pid: u32) -> (u64, u64, f64) {
    let cost = wasmop_testenv::cost(pid);
    (cost.rss_kib, cost.peak_kib, cost.cpu_seconds)
}

/// CPU seconds each control-plane component has used so far, by name.
fn plane_cpu(env: &TestEnv) -> BTreeMap<&'static str, f64> {
    let mut by_name = BTreeMap::new();
    for (name, pid) in env.pids() {
        *by_name.entry(name).or_default() += cost(pid).2;
    }
    by_name
}

/// What each component used from `before` to `after`.
fn plane_cpu_since(
    before: &BTreeMap<&'static str, f64>,
    after: BTreeMap<&'static str, f64>,
) -> BTreeMap<&'static str, f64> {
    after
        .into_iter()
        .map(|(name, secs)| (name, secs - before.get(name).copied().unwrap_or(0.0)))
        .collect()
}

/// The generation a Cache's status reports, by either operator's status:
/// wasmop's `status.observedGeneration`, the peer's condition's.
fn observed_generation(cache: &DynamicObject) -> Option<i64> {
    cache
        .data
        .pointer("/status/observedGeneration")
        .or_else(|| {
            cache
                .data
                .pointer("/status/conditions/0/observedGeneration")
        })
        .and_then(Value::as_i64)
}

/// Whether a Cache is Ready at its generation.
fn converged(cache: &DynamicObject) -> bool {
    cache.data.pointer("/status/phase") == Some(&json!("Ready"))
        && observed_generation(cache) == cache.metadata.generation
}

/// The Cache `name` of `group` every run creates.
fn cache_object(group: &str, name: &str) -> Value {
    json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "Cache",
        "metadata": {"name": name},
        "spec": {"image": "redis:7.2", "replicas": 1},
    })
}

/// Creates the Caches `<prefix>0` … `<prefix><n-1>` in `group`.
async fn create_caches(api: &Api<DynamicObject>, group: &str, prefix: &str, n: usize) {
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let cache: DynamicObject =
                serde_json::from_value(cache_object(group, &format!("{prefix}{i}")))
                    .expect("cache");
            async move { api.create(&PostParams::default(), &cache).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .expect("create caches");
}

/// Creates the Caches `<prefix>0` … `<prefix><n-1>` in `group` as a user
/// does: one file of N documents given to `kubectl apply -f` (the
/// machine's kubectl), which reads and creates them one after another.
async fn kubectl_apply_caches(env: &TestEnv, ns: &str, group: &str, prefix: &str, n: usize) {
    let file = env.temp_dir().join(format!("caches-{ns}.yaml"));
    // A stream of JSON objects, one a Cache, which kubectl reads in order.
    let documents: Vec<String> = (0..n)
        .map(|i| cache_object(group, &format!("{prefix}{i}")).to_string())
        .collect();
    std::fs::write(&file, documents.join("\n")).expect("caches file");
    let status = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(["apply", "--namespace", ns, "-f"])
        .arg(&file)
        .stdout(Stdio::null())
        .status()
        .await
        .expect("kubectl (the bench runs the machine's kubectl)");
    assert!(status.success(), "kubectl apply of {n} Caches: {status}");
}

async fn wait_converged(api: &Api<DynamicObject>, n: usize, started: Instant) -> Duration {
    loop {
        let list = api.list(&ListParams::default()).await.expect("list");
        let ready = list.items.iter().filter(|c| converged(c)).count();
        if ready == n {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < CONVERGE_LIMIT,
            "{ready} of {n} Caches converged after {CONVERGE_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `user`'s requests in `[from, to)` by verb and resource (`patch
/// caches/status`), from the audit log.
fn requests_by_verb(
    env: &TestEnv,
    user: &str,
    from: SystemTime,
    to: SystemTime,
) -> BTreeMap<String, usize> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let window = Timestamp::try_from(from).expect("a time after 1970")
        ..Timestamp::try_from(to).expect("a time after 1970");
    let mut by_verb = BTreeMap::new();
    for event in env.audit_events_of(user).expect("audit log") {
        let at = serde_json::from_value::<MicroTime>(event["requestReceivedTimestamp"].clone());
        if wasmop_testenv::effective_user(&event) == Some(user)
            && at.is_ok_and(|at| window.contains(&at.0))
        {
            let verb = event["verb"].as_str().unwrap_or("?");
            let target = &event["objectRef"];
            let resource = match (target["resource"].as_str(), target["subresource"].as_str()) {
                (Some(r), Some(sub)) => format!("{r}/{sub}"),
                (Some(r), None) => r.to_owned(),
                (None, _) => "-".to_owned(),
            };
            *by_verb.entry(format!("{verb} {resource}")).or_default() += 1;
        }
    }
    by_verb
}

/// Whether a `by_verb` key (`patch caches/status`) is a write.
fn is_write(key: &str) -> bool {
    let verb = key.split(' ').next().unwrap_or_default();
    wasmop_testenv::WRITE_VERBS.contains(&verb)
}

fn writes(by_verb: &BTreeMap<String, usize>) -> usize {
    by_verb
        .iter()
        .filter(|(key, _)| is_write(key))
        .map(|(_, n)| n)
        .sum()
}

/// The writes among `by_verb`.
fn only_writes(by_verb: BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    by_verb
        .into_iter()
        .filter(|(key, _)| is_write(key))
        .collect()
}

/// The writes of Events (`events.k8s.io` and core) among `by_verb`.
fn event_writes(by_verb: &BTreeMap<String, usize>) -> usize {
    by_verb
        .iter()
        .filter(|(key, _)| key.ends_with(" events") && is_write(key))
        .map(|(_, n)| n)
        .sum()
}

/// One operator's figures for N Caches.
#[derive(Debug, Default, Clone)]
struct Run {
    converge: Duration,
    /// How long the user's own `kubectl apply` of the N Caches took, with
    /// the operator answering them.
    created: Duration,
    /// From the probe's spec change to its status at that generation.
    fairness: Duration,
    /// From deleting every Cache to none left.
    deletion: Duration,
    /// The operator's requests while deleting, by verb.
    deletion_requests: BTreeMap<String, usize>,
    /// CPU seconds of each control-plane component while deleting.
    deletion_plane_cpu: BTreeMap<&'static str, f64>,
    /// The metrics' counters while deleting.
    deletion_counters: Counters,
    /// Share of the machine's CPU time busy while deleting, in percent.
    deletion_machine_busy: f64,
    requests: BTreeMap<String, usize>,
    /// The metrics' counters while converging.
    counters: Counters,
    /// Share of the machine's CPU time busy while converging, in percent.
    machine_busy: f64,
    /// CPU seconds of each control-plane component while converging.
    plane_cpu: BTreeMap<&'static str, f64>,
    /// The operator's writes while idle, then after the no-op storm, by
    /// verb and resource.
    steady_writes: BTreeMap<String, usize>,
    storm_writes: BTreeMap<String, usize>,
    rss_peak_mib: f64,
    rss_steady_mib: f64,
    cpu_converge_secs: f64,
    cpu_secs: f64,
}

async fn measure(env: &TestEnv, operator: Operator, n: usize, steady: Duration) -> Run {
    let client = env.client();
    let ns = env
        .create_namespace(&format!("scale-{}-{n}", operator.name()))
        .await
        .expect("namespace");
    let group = group(0);
    let running = start(env, operator, std::slice::from_ref(&group), &ns, &ns).await;
    let pid = running[0].child.id();
    let user = running[0].user.clone();
    let api = caches(&client, &ns, &group);
    // The probe: converged before the burst (which also lets the operator
    // start its watches), changed by a user while the burst converges.
    create_caches(&api, &group, "probe", 1).await;
    wait_converged(&api, 1, Instant::now()).await;
    let metrics = running[0].metrics.expect("metrics address");
    let counters_before = counters(metrics).await;
    let cpu_before = machine_cpu();
    let plane_before = plane_cpu(env);
    let from = SystemTime::now();
    let started = Instant::now();
    // The probe is changed a second into the apply, while the operator
    // answers the Caches that have arrived.
    let (created, fairness) = tokio::join!(
        async {
            kubectl_apply_caches(env, &ns, &group, "c", n).await;
            started.elapsed()
        },
        async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            user_change(&api).await
        }
    );
    let converge = wait_converged(&api, n + 1, started).await;
    let converged_at = SystemTime::now();
    let cpu_after = machine_cpu();
    let converge_cpu = plane_cpu_since(&plane_before, plane_cpu(env));
    let machine_busy =
        100.0 * (cpu_after.0 - cpu_before.0) as f64 / (cpu_after.1 - cpu_before.1).max(1) as f64;
    let converge_counters = counters(metrics).await - counters_before;
    // The API server logs an event just after it answers.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let requests = requests_by_verb(env, &user, from, converged_at);
    let (_, rss_peak, cpu_converge) = cost(pid);

    let steady_from = SystemTime::now();
    tokio::time::sleep(steady).await;
    let steady_to = SystemTime::now();
    let (rss_steady, _, _) = cost(pid);

    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let patch = json!({"metadata": {"annotations": {"scale.wasmop.dev/noop": "1"}}});
                api.patch(
                    &format!("c{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .expect("annotate");
    tokio::time::sleep(Duration::from_secs(30)).await;
    let storm_to = SystemTime::now();
    let (_, _, cpu) = cost(pid);
    let steady_writes = only_writes(requests_by_verb(env, &user, steady_from, steady_to));
    let storm_writes = only_writes(requests_by_verb(env, &user, steady_to, storm_to));
    let (deletion_from, plane_before) = (SystemTime::now(), plane_cpu(env));
    let (cpu_before, counters_before) = (machine_cpu(), counters(metrics).await);
    let deletion = delete_all(&api).await;
    let deletion_plane_cpu = plane_cpu_since(&plane_before, plane_cpu(env));
    let cpu_after = machine_cpu();
    let deletion_counters = counters(metrics).await - counters_before;
    let deletion_machine_busy =
        100.0 * (cpu_after.0 - cpu_before.0) as f64 / (cpu_after.1 - cpu_before.1).max(1) as f64;
    let deletion_to = SystemTime::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deletion_requests = requests_by_verb(env, &user, deletion_from, deletion_to);
    drop(running);
    clear(env, &ns, Some(&group)).await;
    Run {
        converge,
        created,
        fairness,
        deletion,
        deletion_requests,
        deletion_plane_cpu,
        deletion_counters,
        deletion_machine_busy,
        requests,
        counters: converge_counters,
        machine_busy,
        plane_cpu: converge_cpu,
        steady_writes,
        storm_writes,
        rss_peak_mib: rss_peak as f64 / 1024.0,
        rss_steady_mib: rss_steady as f64 / 1024.0,
        cpu_converge_secs: cpu_converge,
        cpu_secs: cpu,
    }
}

/// The Cache a user changes while the burst converges (`create_caches`
/// numbers it).
const PROBE: &str = "probe0";

/// Changes the probe's spec (2 replicas) and waits until its status shows
/// the new generation: how long a user's change waits behind the burst.
async fn user_change(api: &Api<DynamicObject>) -> Duration {
    let patch = json!({"spec": {"replicas": 2}});
    let started = Instant::now();
    let changed = api
        .patch(PROBE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("probe changed");
    loop {
        let probe = api.get(PROBE).await.expect("probe");
        if observed_generation(&probe) >= changed.metadata.generation {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < CONVERGE_LIMIT,
            "the probe's change not reconciled after {CONVERGE_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The names of the Caches `api` lists.
async fn cache_names(api: &Api<DynamicObject>) -> Vec<String> {
    api.list_metadata(&ListParams::default())
        .await
        .expect("list Caches")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect()
}

/// Deletes every Cache as `kubectl delete caches --all` does (one request
/// per Cache, here 32 at a time) and waits until none is left (the
/// operator's finalizer, if it has one, done). A `deletecollection` of
/// 1,000 Caches, the operator working on the first ones, lost its
/// connection here before it answered.
async fn delete_all(api: &Api<DynamicObject>) -> Duration {
    let started = Instant::now();
    futures::stream::iter(cache_names(api).await)
        .map(|name| {
            let api = api.clone();
            async move {
                match api.delete(&name, &DeleteParams::default()).await {
                    Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                    other => other.map(|_| ()),
                }
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .expect("delete Caches");
    loop {
        let left = api
            .list_metadata(&ListParams::default())
            .await
            .expect("list");
        if left.items.is_empty() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < CONVERGE_LIMIT,
            "{} Caches left after {CONVERGE_LIMIT:?}",
            left.items.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes `ns` and waits until it is gone (its Pods with it), so that the
/// next operator runs in a cluster as empty as the one before did and its
/// Pods fit on the fake node (12,000 Pods: at N = 5,000 the floor's and one
/// operator's Pods leave room for only 2,000 more). The Caches of `group`
/// lose their finalizers first: their operator is stopped.
async fn clear(env: &TestEnv, ns: &str, group: Option<&str>) {
    let client = env.client();
    if let Some(group) = group {
        let api = caches(&client, ns, group);
        let names = cache_names(&api).await;
        let patch = json!({"metadata": {"finalizers": null}});
        futures::stream::iter(names)
            .map(|name| {
                let (api, patch) = (api.clone(), &patch);
                async move {
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .map(drop)
                }
            })
            .buffer_unordered(32)
            .try_collect::<Vec<_>>()
            .await
            .expect("finalizers removed");
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    namespaces
        .delete(ns, &DeleteParams::default())
        .await
        .expect("namespace deleted");
    let started = Instant::now();
    while namespaces.get_opt(ns).await.expect("namespace").is_some() {
        assert!(
            started.elapsed() < CONVERGE_LIMIT,
            "namespace {ns} still there after {CONVERGE_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What the control plane takes with no operator.
struct Floor {
    /// N Deployments, Services and ConfigMaps applied until every
    /// Deployment is available.
    available: Duration,
    /// CPU seconds of each control-plane component in it.
    cpu: BTreeMap<&'static str, f64>,
    /// Then every Deployment scaled to zero until none has a pod: the
    /// cleanup a finalizer of the cache-operator's kind waits for.
    scaled_down: Duration,
}

/// The floor: N Deployments, Services and ConfigMaps applied directly;
/// time until every Deployment is available, and the CPU seconds each
/// control-plane component used in it; then the time until every
/// Deployment scaled to zero has no pod.
async fn floor(env: &TestEnv, n: usize) -> Floor {
    let client = env.client();
    let ns = env
        .create_namespace(&format!("scale-floor-{n}"))
        .await
        .expect("namespace");
    let dynamic = |kind: &str, version: &str, group: &str, plural: &str| {
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &ar)
    };
    let deployments = dynamic("Deployment", "v1", "apps", "deployments");
    let services = dynamic("Service", "v1", "", "services");
    let configmaps = dynamic("ConfigMap", "v1", "", "configmaps");
    let plane_before = plane_cpu(env);
    let started = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let (d, s, c) = (deployments.clone(), services.clone(), configmaps.clone());
            async move {
                let name = format!("c{i}");
                let labels = json!({"app": "cache", "cache": name});
                let params = PatchParams::apply("scale-floor");
                c.patch(&format!("{name}-config"), &params, &Patch::Apply(json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("{name}-config")}, "data": {"k": "v"},
                }))).await?;
                d.patch(&name, &params, &Patch::Apply(json!({
                    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                    "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                        "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                            {"name": "cache", "image": "redis:7.2", "ports": [{"containerPort": 6379}]}]}}},
                }))).await?;
                s.patch(&name, &params, &Patch::Apply(json!({
                    "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                    "spec": {"selector": labels, "ports": [{"port": 6379}]},
                }))).await?;
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .expect("apply");
    let typed: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    loop {
        let list = typed.list(&ListParams::default()).await.expect("list");
        let ready = list
            .items
            .iter()
            .filter(|d| d.status.as_ref().and_then(|s| s.ready_replicas) == Some(1))
            .count();
        if ready == n {
            let available = started.elapsed();
            let cpu = plane_cpu_since(&plane_before, plane_cpu(env));
            let scaled_down = scale_down(&deployments, n).await;
            clear(env, &ns, None).await;
            return Floor {
                available,
                cpu,
                scaled_down,
            };
        }
        assert!(started.elapsed() < CONVERGE_LIMIT, "floor: {ready} of {n}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Scales the `n` Deployments `c0` … `c<n-1>` of `api` to zero, 32 requests
/// at a time, and waits until none reports a pod (`status.replicas`, which
/// the cache-operator's finalizer waits for).
async fn scale_down(api: &Api<DynamicObject>, n: usize) -> Duration {
    let started = Instant::now();
    let patch = json!({"spec": {"replicas": 0}});
    futures::stream::iter(0..n)
        .map(|i| {
            let (api, patch) = (api.clone(), &patch);
            async move {
                api.patch(
                    &format!("c{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .map(drop)
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .expect("scale to zero");
    loop {
        let list = api.list(&ListParams::default()).await.expect("list");
        let left = list
            .items
            .iter()
            .filter(|d| d.data.pointer("/status/replicas").and_then(Value::as_i64) > Some(0))
            .count();
        if left == 0 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < CONVERGE_LIMIT,
            "floor: {left} of {n} Deployments still have pods"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Total RSS (MiB) of M idle operators, each its own CRD group with one
/// Cache.
async fn density(env: &TestEnv, operator: Operator, m: usize) -> f64 {
    let client = env.client();
    let groups: Vec<String> = (0..m).map(group).collect();
    let ns = env
        .create_namespace(&format!("density-{}-{m}", operator.name()))
        .await
        .expect("namespace");
    let running = start(env, operator, &groups, &ns, &ns).await;
    // One Cache per group, named apart: children are named after their
    // Cache, and all groups share the namespace.
    for (i, g) in groups.iter().enumerate() {
        let api = caches(&client, &ns, g);
        create_caches(&api, g, &format!("g{i}-c"), 1).await;
    }
    for g in &groups {
        wait_converged(&caches(&client, &ns, g), 1, Instant::now()).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let total: u64 = running.iter().map(|r| cost(r.child.id()).0).sum();
    drop(running);
    total as f64 / 1024.0
}

fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        if a == 0.0 { "=".into() } else { "inf".into() }
    } else {
        format!("{:.2}", a / b)
    }
}

/// One table row: each operator's figure (wasmop, the chapter-3 peer, the
/// finished peer) and wasmop's ratio to each peer, "-" where an operator
/// was not measured.
fn row(label: &str, figures: [Option<f64>; 3], unit: &str) {
    let cell = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}{unit}"));
    let ratio_to = |peer: Option<f64>| match (figures[0], peer) {
        (Some(w), Some(p)) => ratio(w, p),
        _ => "-".to_owned(),
    };
    println!(
        "  {label:<42} {:>12} {:>12} {:>13} {:>8} {:>8}",
        cell(figures[0]),
        cell(figures[1]),
        cell(figures[2]),
        ratio_to(figures[1]),
        ratio_to(figures[2]),
    );
}

/// `name 1.2s, ...` for each control-plane component.
fn by_component(cpu: &BTreeMap<&'static str, f64>) -> String {
    cpu.iter()
        .map(|(name, secs)| format!("{name} {secs:.1}s"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn verbs(by_verb: &BTreeMap<String, usize>) -> String {
    by_verb
        .iter()
        .map(|(v, n)| format!("{v} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::main]
async fn main() {
    let ns_list = env_list("WASMOP_SCALE_N", "100,1000,5000");
    let m_list = env_list("WASMOP_SCALE_M", "1,5,20");
    let steady = Duration::from_secs(
        std::env::var("WASMOP_SCALE_STEADY_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60),
    );
    let default_operators = Operator::ALL.map(Operator::name).join(",");
    let operators = std::env::var("WASMOP_SCALE_OPERATORS").unwrap_or(default_operators);
    let measured: Vec<Operator> = Operator::ALL
        .into_iter()
        .filter(|o| operators.split(',').any(|name| name.trim() == o.name()))
        .collect();
    assert!(
        !measured.is_empty(),
        "WASMOP_SCALE_OPERATORS names none of {:?}",
        Operator::ALL.map(Operator::name)
    );
    // The peers are built before the control plane starts, so a cold
    // build's minutes are not spent beside it.
    for &peer in measured.iter().filter(|&&o| o != Operator::Wasmop) {
        println!("scale: {} {}", peer.label(), peer_binary(peer).display());
    }
    let env = TestEnv::start().await.expect("control plane");
    let client = env.client();
    let max_m = m_list.iter().copied().max().unwrap_or(1);
    for i in 0..max_m {
        install_crd(&client, &group(i)).await;
    }

    println!(
        "\nscale: wasmop (one host, {} guest) against the seeds' controller-runtime operator as chapter 3 writes it (peer ch.3) and as stages 4 and 5 finish it (peer finished), one real control plane",
        guest()
    );
    println!(
        "  {:<42} {:>12} {:>12} {:>13} {:>8} {:>8}",
        "",
        Operator::Wasmop.label(),
        Operator::Peer.label(),
        Operator::Finished.label(),
        "w/ch.3",
        "w/fin."
    );
    for &n in &ns_list {
        let floor = floor(&env, n).await;
        let mut runs: [Option<Run>; 3] = [None, None, None];
        for (slot, operator) in Operator::ALL.into_iter().enumerate() {
            if measured.contains(&operator) {
                runs[slot] = Some(measure(&env, operator, n, steady).await);
            }
        }
        let secs = |d: Duration| d.as_secs_f64();
        println!("N = {n}");
        println!(
            "  {:<42} {:>12} (no operator: Deployments, Services, ConfigMaps applied directly)",
            "floor: all Deployments available",
            format!("{:.1}s", secs(floor.available))
        );
        println!("    CPU seconds in it: {}", by_component(&floor.cpu));
        println!(
            "  {:<42} {:>12} (no operator: every Deployment scaled to 0, the finalizers' cleanup)",
            "floor: all their pods gone",
            format!("{:.1}s", secs(floor.scaled_down))
        );
        let figure = |label: &str, unit: &str, f: &dyn Fn(&Run) -> f64| {
            row(label, runs.each_ref().map(|r| r.as_ref().map(f)), unit);
        };
        figure("convergence (all Ready at generation)", "s", &|r| {
            secs(r.converge)
        });
        figure("  / floor", "", &|r| {
            secs(r.converge) / secs(floor.available)
        });
        figure("  the user's kubectl apply of the N Caches", "s", &|r| {
            secs(r.created)
        });
        figure("  Caches per second", "", &|r| n as f64 / secs(r.converge));
        figure("  API requests during it", "", &|r| {
            r.requests.values().sum::<usize>() as f64
        });
        figure("  writes during it", "", &|r| writes(&r.requests) as f64);
        figure("  writes per second", "", &|r| {
            writes(&r.requests) as f64 / secs(r.converge)
        });
        figure("  API requests per converged Cache", "", &|r| {
            r.requests.values().sum::<usize>() as f64 / n as f64
        });
        figure("  writes per converged Cache", "", &|r| {
            writes(&r.requests) as f64 / n as f64
        });
        figure("    of them Event writes", "", &|r| {
            event_writes(&r.requests) as f64 / n as f64
        });
        figure("  machine CPU busy (all processes)", "%", &|r| {
            r.machine_busy
        });
        for component in floor.cpu.keys() {
            figure(&format!("  CPU seconds, {component}"), "s", &|r| {
                r.plane_cpu.get(component).copied().unwrap_or(0.0)
            });
        }
        figure("  reconciles during it, per Cache", "", &|r| {
            r.counters.reconciles / (n + 1) as f64
        });
        figure("  reconcile, mean", "ms", &|r| {
            1000.0 * r.counters.reconcile_secs / r.counters.reconciles
        });
        figure("  wait in the queue, mean", "ms", &|r| {
            1000.0 * r.counters.queued_secs / r.counters.queued
        });
        for (operator, run) in Operator::ALL.into_iter().zip(&runs) {
            if let Some(run) = run {
                println!("    {}: {}", operator.label(), verbs(&run.requests));
            }
        }
        figure("a user's change while N converge: seconds", "s", &|r| {
            secs(r.fairness)
        });
        figure(&format!("steady {}s: writes", steady.as_secs()), "", &|r| {
            writes(&r.steady_writes) as f64
        });
        figure("no-op storm (annotate all): writes", "", &|r| {
            writes(&r.storm_writes) as f64
        });
        for (operator, run) in Operator::ALL.into_iter().zip(&runs) {
            if let Some(run) = run
                && writes(&run.steady_writes) + writes(&run.storm_writes) > 0
            {
                println!(
                    "    {}: idle {}; storm {}",
                    operator.label(),
                    verbs(&run.steady_writes),
                    verbs(&run.storm_writes)
                );
            }
        }
        figure("RSS peak", " MiB", &|r| r.rss_peak_mib);
        figure("RSS steady", " MiB", &|r| r.rss_steady_mib);
        figure("CPU seconds to converge", "s", &|r| r.cpu_converge_secs);
        figure("CPU seconds (convergence, idle, storm)", "s", &|r| {
            r.cpu_secs
        });
        figure(
            "deletion: all Caches gone (ch.3: no finalizer)",
            "s",
            &|r| secs(r.deletion),
        );
        figure("  Caches deleted per second", "", &|r| {
            n as f64 / secs(r.deletion)
        });
        figure("  writes per deleted Cache", "", &|r| {
            writes(&r.deletion_requests) as f64 / n as f64
        });
        figure("    of them Event writes", "", &|r| {
            event_writes(&r.deletion_requests) as f64 / n as f64
        });
        figure("  reconciles during it, per Cache", "", &|r| {
            r.deletion_counters.reconciles / n as f64
        });
        figure("  reconcile, mean", "ms", &|r| {
            1000.0 * r.deletion_counters.reconcile_secs / r.deletion_counters.reconciles
        });
        figure("  wait in the queue, mean", "ms", &|r| {
            1000.0 * r.deletion_counters.queued_secs / r.deletion_counters.queued
        });
        figure("  machine CPU busy (all processes)", "%", &|r| {
            r.deletion_machine_busy
        });
        for component in floor.cpu.keys() {
            figure(&format!("  CPU seconds, {component}"), "s", &|r| {
                r.deletion_plane_cpu.get(component).copied().unwrap_or(0.0)
            });
        }
        for (operator, run) in Operator::ALL.into_iter().zip(&runs) {
            if let Some(run) = run {
                println!(
                    "    {}: {}",
                    operator.label(),
                    verbs(&run.deletion_requests)
                );
            }
        }
    }
    println!("density (M operators idle, one CRD group and one Cache each)");
    let mut first: Option<[Option<f64>; 3]> = None;
    for &m in &m_list {
        let mut totals: [Option<f64>; 3] = [None, None, None];
        for (slot, operator) in Operator::ALL.into_iter().enumerate() {
            if measured.contains(&operator) {
                totals[slot] = Some(density(&env, operator, m).await);
            }
        }
        row(&format!("M = {m}: total RSS"), totals, " MiB");
        if let Some(one) = first.filter(|_| m > 1) {
            let per_extra = |slot: usize| Some((totals[slot]? - one[slot]?) / (m - 1) as f64);
            row(
                &format!("M = {m}: RSS per extra operator"),
                [per_extra(0), per_extra(1), per_extra(2)],
                " MiB",
            );
        }
        if m == 1 {
            first = Some(totals);
        }
    }
}
