//! `cargo xtask demo` (the README's main command): the whole wasmop story on
//! a local control plane, step by step, in words a newcomer follows.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::Value;
use wasmop_testenv::TestEnv;

use crate::guests;

mod rollouts;

const NS: &str = "wasmop-system";
const MANAGER: &str = "wasmop-demo";

/// Runs the demo. `--keep-running` leaves everything up until Ctrl-C;
/// `--ha` runs three hosts with leader election, splits the guest into
/// three shards over them and shows a failover; `--oci`
/// lists the guest by a tag in a local OCI registry and swaps it with
/// `wasmop push`.
pub fn run(args: Vec<String>) -> Result<()> {
    const FLAGS: [&str; 3] = ["--keep-running", "--ha", "--oci"];
    let has = |flag: &str| args.iter().any(|a| a == flag);
    if let Some(other) = args.iter().find(|a| !FLAGS.contains(&a.as_str())) {
        bail!(
            "unknown demo argument {other:?} (the flags are {})",
            FLAGS.join(", ")
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(demo(has("--keep-running"), has("--ha"), has("--oci")))
}

/// `cargo xtask demo --ha --oci --keep-running` as a user runs it, through
/// cargo (which replaces itself with the xtask binary, so the signal below
/// reaches the demo): every mode at once, stopped with Ctrl-C (SIGINT) at
/// its prompt; fails unless it reaches the prompt and then exits 0. Not
/// this process's own executable: a `cargo xtask` of the docs test may have
/// relinked it since it started.
pub fn run_in_ci() -> Result<()> {
    use std::io::{BufRead as _, BufReader};
    let mut child = crate::process::cargo(&["xtask", "demo", "--ha", "--oci", "--keep-running"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the demo")?;
    let stdout = child.stdout.take().context("the demo's stdout")?;
    let mut prompted = false;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        println!("{line}");
        if line.starts_with("Press Ctrl-C to stop.") {
            prompted = true;
            rustix::process::kill_process(
                rustix::process::Pid::from_child(&child),
                rustix::process::Signal::INT,
            )?;
        }
    }
    let status = child.wait()?;
    if !prompted {
        bail!("the demo ended before its prompt ({status})");
    }
    if !status.success() {
        bail!("the demo failed after Ctrl-C ({status})");
    }
    Ok(())
}

/// `--oci`: the guest's tag in the demo registry, followed every 2 s.
const OCI_POLL: &str = "2s";

fn step(n: u32, text: &str) {
    println!("\n== Step {n}: {text}");
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

async fn demo(keep: bool, ha: bool, oci: bool) -> Result<()> {
    println!("wasmop demo: one host process runs Kubernetes operators compiled to WebAssembly,");
    println!("and swaps their logic when a ConfigMap changes, without restarting.");

    step(
        1,
        "build the operator guests (Rust, and the same operator in Go, compiled to wasm components) and the wasmop host",
    );
    // The control plane (and, with --oci, the registry) is built from Go
    // modules while Cargo builds the guests and the host: on a new machine
    // the two are the demo's longest waits, and they need not wait for
    // each other.
    let go_tools = std::thread::spawn(move || -> Result<()> {
        wasmop_testenv::ensure_binaries()?;
        if oci {
            wasmop_testenv::ensure_registry_binary()?;
        }
        Ok(())
    });
    println!(
        "   building the guests and the host with Cargo, the control plane with Go, side by side"
    );
    guests::build_demo()?;
    // The debug build the tests use: it shares their build, and the host
    // compiles guests with Cranelift optimised either way.
    crate::process::run(&mut crate::process::cargo(&[
        "build",
        "-p",
        "wasmop-host",
        "--bin",
        "wasmop",
    ]))?;
    if !go_tools.is_finished() {
        println!(
            "   waiting for the control plane's Go build (cached in ~/.cache/wasmop once built; its progress is on stderr)"
        );
    }
    go_tools
        .join()
        .map_err(|_| anyhow::anyhow!("the control plane's build panicked"))??;
    let wasmop = guests::target_dir().join("debug/wasmop");
    let guest_dir = guests::guest_dir();
    for g in ["cache-operator", "cache-operator-v2", "cache-operator-go"] {
        let size = std::fs::metadata(guest_dir.join(format!("{g}.wasm")))?.len();
        println!("   {g}.wasm: {} KiB", size / 1024);
    }

    step(
        2,
        "start a local Kubernetes control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok fake nodes)",
    );
    let env = TestEnv::start().await?;
    println!(
        "   ready in {:.1} s; kubeconfig: {}",
        env.startup_time().as_secs_f64(),
        env.kubeconfig_path().display()
    );
    let client = env.client();
    let registry = if oci {
        let registry = wasmop_testenv::Registry::start(None).await?;
        println!(
            "   --oci: a CNCF distribution registry {} serves plain HTTP at {}",
            wasmop_testenv::REGISTRY_VERSION,
            registry.address()
        );
        Some(registry)
    } else {
        None
    };
    let reference = registry
        .as_ref()
        .map(|r| format!("{}/demo/cache-operator:stable", r.address()));
    if let Some(reference) = &reference {
        push(&wasmop, &guest_dir.join("cache-operator.wasm"), reference)?;
    }

    step(
        3,
        "install deploy/: the Cache CRD, the wasmop-system namespace, least-privilege RBAC and the guest list ConfigMap",
    );
    install(&client, &guest_dir, reference.as_deref()).await?;
    println!(
        "   CRD caches.apps.example.com, the host's roles and the guest's ServiceAccount {NS}/wasmop-guest-cache-operator with its own ClusterRole (made by `wasmop rbac --guest-identity impersonate`), ConfigMap {NS}/wasmop-guests"
    );

    step(
        4,
        "start the wasmop host; it reads the guest list ConfigMap and loads cache-operator",
    );
    let (_, kubeconfig) = env.user_kubeconfig("wasmop-host", &[]).await?;
    let log_path = env.temp_dir().join("wasmop.log");
    let lease: &[&str] = if ha { wasmop_testenv::SHORT_LEASE } else { &[] };
    let webhooks = webhook_address()?;
    let mut host = start_host(&wasmop, &kubeconfig, &log_path, &webhooks, lease)?;
    let pid = host.id();
    wait_log(&log_path, "started guest", Duration::from_secs(60)).await?;
    webhooks_registered(&client, &log_path).await?;
    println!(
        "   host running as PID {pid}, identity `wasmop-host` bound only to the generated roles; the guest's requests impersonate its ServiceAccount; log: {}",
        log_path.display()
    );
    let mut others = Vec::new();
    if ha {
        wait_log(&log_path, "became the leader", Duration::from_secs(60)).await?;
        for i in 1..3 {
            let other_log = env.temp_dir().join(format!("wasmop-{i}.log"));
            let other = start_host(&wasmop, &kubeconfig, &other_log, &webhooks, lease)?;
            wait_log(&other_log, "controller started", Duration::from_secs(60)).await?;
            others.push((other, other_log));
        }
        let (holder, _) = unit_holder(&client, GUEST_LEASE).await?;
        println!(
            "   --ha: three replicas (PIDs {pid}, {}, {}) follow the same list, each with a Lease of its own; the guest's Lease {NS}/{GUEST_LEASE} is held by {holder}, the other two keep their caches warm",
            others[0].0.id(),
            others[1].0.id()
        );
    }

    step(
        5,
        "create the sample Cache (deploy/samples/cache.yaml) and watch the operator build it; its guest also converts and admits Caches",
    );
    apply_file(
        &client,
        &root().join("deploy/samples/cache.yaml"),
        "default",
    )
    .await?;
    let caches = cache_api(&client);
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let c = caches.get("demo-cache").await?;
        let line = status_line(&c);
        if line != last {
            println!(
                "   [{:>4.1}s] Cache demo-cache: {line}",
                started.elapsed().as_secs_f64()
            );
            last = line;
        }
        if c.data.pointer("/status/phase") == Some(&Value::from("Ready")) {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!(
                "the Cache did not become Ready; host log: {}",
                log_path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    show_children(&client).await?;
    show_webhooks(&client).await?;

    let v2_path = guest_dir.join("cache-operator-v2.wasm");
    let swap_started = match &reference {
        Some(reference) => {
            step(
                6,
                &format!(
                    "swap the operator to v2 with `wasmop push` to the tag the list follows (ociPollInterval {OCI_POLL}, no restart)"
                ),
            );
            push(&wasmop, &v2_path, reference)?;
            Instant::now()
        }
        None => {
            step(
                6,
                "swap the operator to v2 by updating the module ConfigMap (no restart)",
            );
            let started = Instant::now();
            put_module(&client, &std::fs::read(&v2_path)?).await?;
            started
        }
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    version_shown(&deployments, Some("v2"), swap_started, &log_path).await?;
    println!(
        "   v2 took effect {:.2} s after the {}",
        swap_started.elapsed().as_secs_f64(),
        if oci { "push" } else { "ConfigMap update" }
    );
    show_children(&client).await?;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    if pdbs.get_opt("demo-cache").await?.is_some() {
        println!("   v2 also added a PodDisruptionBudget demo-cache");
    }
    let still = host.try_wait()?.is_none();
    println!("   host PID still {pid} and running: {still}");
    if !still {
        bail!("the host exited; log: {}", log_path.display());
    }

    step(
        7,
        "swap the operator to its Go build (guests/cache-operator-go: the seeds' kubebuilder Reconcile in Go, v1's logic; 5 MB, so listed from a file, not a ConfigMap) and back to v2, without a restart",
    );
    let go_module = guest_dir.join("cache-operator-go.wasm");
    let started = Instant::now();
    apply_value(&client, &guest_list_from_file(&go_module), NS).await?;
    version_shown(&deployments, None, started, &log_path).await?;
    println!(
        "   the Go build took effect {:.2} s after the guest list changed: demo-cache's children lost v2's label",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    apply_value(&client, &demo_guest_list(reference.as_deref()), NS).await?;
    version_shown(&deployments, Some("v2"), started, &log_path).await?;
    println!(
        "   back on v2 {:.2} s after the guest list changed; host PID still {pid}",
        started.elapsed().as_secs_f64()
    );
    if host.try_wait()?.is_some() {
        bail!("the host exited; log: {}", log_path.display());
    }

    let mut next = rollouts::show(
        &client,
        &wasmop,
        env.kubeconfig_path(),
        &guest_dir,
        &log_path,
        8,
    )
    .await?;

    if ha {
        step(
            next,
            "scale out: the cache-operator's entry takes `shards: 3`; each replica holds one shard and watches and caches only its Caches; then kill -9 the one that holds demo-cache's shard",
        );
        apply_value(&client, &rollouts::sharded_list("cache-operator-v1", 3), NS).await?;
        let leases: Vec<String> = (0..3).map(|k| format!("{GUEST_LEASE}-{k}")).collect();
        let spread = Instant::now();
        let holders = loop {
            let mut holders = Vec::new();
            for lease in &leases {
                match unit_holder(&client, lease).await? {
                    (holder, true) => holders.push(holder),
                    _ => break,
                }
            }
            let distinct: std::collections::BTreeSet<&String> = holders.iter().collect();
            if distinct.len() == leases.len() {
                break holders;
            }
            if spread.elapsed() > Duration::from_secs(60) {
                bail!("the three shards were not spread over the three replicas: {holders:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        for (lease, holder) in leases.iter().zip(&holders) {
            println!("   Lease {NS}/{lease}: held by {holder}");
        }
        rollouts::wasmop(
            &wasmop,
            env.kubeconfig_path(),
            &[
                "status",
                "--guests-configmap",
                "wasmop-system/wasmop-guests",
            ],
            12,
        )?;
        let labelled = Instant::now();
        let shard = loop {
            let c = caches.get("demo-cache").await?;
            if let Some(shard) = c.labels().get("wasmop.dev/shard") {
                break shard.clone();
            }
            if labelled.elapsed() > Duration::from_secs(60) {
                bail!("demo-cache never got its shard label");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let lease = format!("{GUEST_LEASE}-{shard}");
        println!("   demo-cache carries wasmop.dev/shard={shard}: its Lease is {NS}/{lease}");
        let (holder, _) = unit_holder(&client, &lease).await?;
        let mut logs = vec![log_path.clone()];
        logs.extend(others.iter().map(|(_, log)| log.clone()));
        let victim = logs
            .iter()
            .position(|log| identity_in(log).is_ok_and(|id| id == holder))
            .context("no replica's log names the holder")?;
        let killed = Instant::now();
        let victim_pid = if victim == 0 {
            let _ = host.kill();
            let _ = host.wait();
            pid
        } else {
            let (other, _) = &mut others[victim - 1];
            let _ = other.kill();
            let _ = other.wait();
            other.id()
        };
        let successor = loop {
            let (now, renewed) = unit_holder(&client, &lease).await?;
            if now != holder && renewed {
                break now;
            }
            if killed.elapsed() > Duration::from_secs(60) {
                bail!("the killed replica's Lease was not taken");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        println!(
            "   PID {victim_pid} ({holder}) killed; {successor} took the shard's Lease {:.1} s later (lease 6 s), listed the shard's Caches and reconciles them",
            killed.elapsed().as_secs_f64()
        );
        let patch = serde_json::json!({"spec": {"replicas": 3}});
        caches
            .patch("demo-cache", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let changed = Instant::now();
        loop {
            let d = deployments.get("demo-cache").await?;
            if d.spec.as_ref().and_then(|s| s.replicas) == Some(3) {
                break;
            }
            if changed.elapsed() > Duration::from_secs(60) {
                bail!("the surviving replicas did not reconcile");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        println!(
            "   spec.replicas: 3 reached the Deployment {:.2} s later, written by the new holder of the shard's Lease",
            changed.elapsed().as_secs_f64()
        );
        next += 1;
    }

    step(
        next,
        "upgrade a Cache to an image whose pods never become Ready; Kubernetes declares the rollout failed and the operator rolls it back",
    );
    failed_upgrade_rolled_back(&client).await?;
    next += 1;

    if keep {
        // Listening before the prompt: a Ctrl-C right after it is caught,
        // not the default action that kills the demo with its processes.
        let mut interrupt =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        println!("\nEverything keeps running. In another shell:");
        println!("   export KUBECONFIG={}", env.kubeconfig_path().display());
        println!("   kubectl get caches,deployments,services,configmaps -A");
        println!("Press Ctrl-C to stop.");
        interrupt.recv().await;
    }
    step(next, "stop the hosts and the control plane");
    let _ = host.kill();
    let _ = host.wait();
    for (mut other, _) in others {
        let _ = other.kill();
        let _ = other.wait();
    }
    drop(env);
    println!("   done: everything the demo started is stopped and removed.");
    Ok(())
}

/// A Cache of its own (`upgrade-demo`, two replicas as v2's admission asks,
/// `spec.upgrade.timeoutSeconds: 30`) upgraded to `redis:7.4-never-ready`,
/// whose pods kwok never makes Ready:
/// the Deployment controller reports `ProgressDeadlineExceeded` after 30 s
/// without progress and the operator sets the Deployment back to the last
/// good image, leaving `spec.image` as it is.
async fn failed_upgrade_rolled_back(client: &Client) -> Result<()> {
    const FAILING: &str = "redis:7.4-never-ready";
    let caches = cache_api(client);
    let cache: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
        "metadata": {"name": "upgrade-demo"},
        "spec": {"image": "redis:7.2", "replicas": 2, "upgrade": {"timeoutSeconds": 30}},
    }))?;
    caches
        .create(&kube::api::PostParams::default(), &cache)
        .await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    let mut last = String::new();
    let mut changed = false;
    loop {
        let c = caches.get("upgrade-demo").await?;
        let status = |field: &str| c.data["status"][field].as_str().unwrap_or("-").to_owned();
        let upgrading = c.data["status"]["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "Upgrading"))
            .map_or("-".to_owned(), |c| {
                format!(
                    "{}/{}",
                    c["status"].as_str().unwrap_or("-"),
                    c["reason"].as_str().unwrap_or("-")
                )
            });
        let image = deployments
            .get_opt("upgrade-demo")
            .await?
            .and_then(|d| d.spec?.template.spec?.containers.first()?.image.clone())
            .unwrap_or_else(|| "-".to_owned());
        let line = format!(
            "phase={} Upgrading={upgrading} lastGoodImage={} Deployment image={image}",
            status("phase"),
            status("lastGoodImage")
        );
        if line != last {
            println!(
                "   [{:>4.1}s] Cache upgrade-demo: {line}",
                started.elapsed().as_secs_f64()
            );
            last = line;
        }
        if !changed && status("lastGoodImage") == "redis:7.2" {
            let patch = serde_json::json!({"spec": {"image": FAILING}});
            caches
                .patch(
                    "upgrade-demo",
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            println!("   spec.image: {FAILING} (timeoutSeconds 30)");
            changed = true;
        }
        if changed && status("phase") == "Degraded" && image == "redis:7.2" {
            let upgraded = c.data["status"]["conditions"]
                .as_array()
                .and_then(|l| l.iter().find(|c| c["type"] == "Upgraded"))
                .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default();
            println!("   Upgraded=False, RolledBack: {upgraded}");
            println!(
                "   spec.image is still {}, the user's; the operator will not try it again until it changes",
                c.data["spec"]["image"].as_str().unwrap_or("-")
            );
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("the failed upgrade was not rolled back: {last}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A free port on loopback for the webhooks every host of the demo serves
/// (each binds it with `SO_REUSEPORT`, so the registered address reaches a
/// live host whichever leads).
fn webhook_address() -> Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.to_string())
}

/// A host process the demo started, killed when dropped (the demo ends, or
/// fails on the way).
struct HostChild(Child);

impl std::ops::Deref for HostChild {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for HostChild {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for HostChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_host(
    wasmop: &Path,
    kubeconfig: &Path,
    log: &Path,
    webhooks: &str,
    extra: &[&str],
) -> Result<HostChild> {
    let file = std::fs::File::create(log)?;
    Command::new(wasmop)
        .args([
            "run",
            "--guests-configmap",
            &format!("{NS}/wasmop-guests"),
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-probe-bind-address",
            "127.0.0.1:0",
            // The guest's admission and conversion, reached by the local
            // API server; the certificate is shared through its Secret.
            "--webhook-host",
            "127.0.0.1",
            "--webhook-bind-address",
            webhooks,
            "--webhook-cert-secret",
            &format!("{NS}/wasmop-webhook-tls"),
            // As deploy/ runs it: the guest's requests impersonate its
            // ServiceAccount, bound by deploy/rbac/roles.yaml.
            "--guest-identity",
            "impersonate",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .map(HostChild)
        .with_context(|| format!("starting {}", wasmop.display()))
}

async fn wait_log(path: &Path, needle: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if std::fs::read_to_string(path)
            .unwrap_or_default()
            .contains(needle)
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the host never logged {needle:?}; see {}", path.display())
}

fn cache_api(client: &Client) -> Api<DynamicObject> {
    cache_api_in(client, "default")
}

fn status_line(c: &DynamicObject) -> String {
    let s = c.data.get("status");
    let get = |k: &str| {
        s.and_then(|s| s.get(k)).map_or_else(
            || "-".to_string(),
            |v| v.to_string().trim_matches('"').to_string(),
        )
    };
    format!(
        "phase={} readyReplicas={} observedGeneration={}",
        get("phase"),
        get("readyReplicas"),
        get("observedGeneration")
    )
}

async fn show_children(client: &Client) -> Result<()> {
    let d: Deployment = Api::namespaced(client.clone(), "default")
        .get("demo-cache")
        .await?;
    let s: Service = Api::namespaced(client.clone(), "default")
        .get("demo-cache")
        .await?;
    let c: ConfigMap = Api::namespaced(client.clone(), "default")
        .get("demo-cache-config")
        .await?;
    let labels = |l: &std::collections::BTreeMap<String, String>| {
        l.iter()
            .filter(|(k, _)| k.starts_with("wasmop.dev/"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let ready = d
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    println!("   children of Cache demo-cache (owned by it; created by server-side apply):");
    println!(
        "     Deployment demo-cache     ready {ready}/{}  {}",
        d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0),
        labels(d.labels())
    );
    println!(
        "     Service    demo-cache     port {}          {}",
        s.spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .and_then(|p| p.first())
            .map_or(0, |p| p.port),
        labels(s.labels())
    );
    println!(
        "     ConfigMap  demo-cache-config                {}",
        labels(c.labels())
    );
    Ok(())
}

async fn put_module(client: &Client, module: &[u8]) -> Result<()> {
    put_module_named(client, "cache-operator-module", module).await
}

/// Puts `module` into the ConfigMap `name` (key `module.wasm`).
async fn put_module_named(client: &Client, name: &str, module: &[u8]) -> Result<()> {
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        binary_data: Some([("module.wasm".to_string(), ByteString(module.to_vec()))].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&cm),
        )
        .await?;
    Ok(())
}

/// `wasmop push --insecure <module> <reference>`, its line shown.
fn push(wasmop: &Path, module: &Path, reference: &str) -> Result<()> {
    let out = Command::new(wasmop)
        .args(["push", "--insecure"])
        .arg(module)
        .arg(reference)
        .stdin(Stdio::null())
        .output()
        .context("running wasmop push")?;
    if !out.status.success() {
        bail!(
            "wasmop push failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    println!(
        "   $ wasmop push --insecure {} {reference}\n   {}",
        module.file_name().unwrap_or_default().to_string_lossy(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    Ok(())
}

async fn install(client: &Client, guest_dir: &Path, reference: Option<&str>) -> Result<()> {
    let deploy = root().join("deploy");
    apply_file(client, &deploy.join("crds/cache.yaml"), "").await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for _ in 0..100 {
        let crd = crds.get("caches.apps.example.com").await?;
        if crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for file in ["host/namespace.yaml", "rbac/roles.yaml"] {
        apply_file(client, &deploy.join(file), NS).await?;
    }
    // The host runs here as the user `wasmop-host`, not as the in-cluster
    // ServiceAccount: bind the same roles to it.
    apply_value(client, &user_bindings(), NS).await?;
    if reference.is_none() {
        put_module(
            client,
            &std::fs::read(guest_dir.join("cache-operator.wasm"))?,
        )
        .await?;
    }
    // deploy/host/guests.yaml lists the module from the image; the demo
    // lists it from the ConfigMap it swaps, or the tag it pushes.
    apply_value(client, &demo_guest_list(reference), NS).await?;
    Ok(())
}

/// The demo's guest list: deploy/host/guests.yaml with the module from the
/// ConfigMap `cache-operator-module`, or from `reference`.
fn demo_guest_list(reference: Option<&str>) -> Value {
    match reference {
        None => guest_list("configMap: {name: cache-operator-module, key: module.wasm}\n"),
        Some(reference) => guest_list(&format!(
            "oci: {reference}\n    insecure: true\n    ociPollInterval: {OCI_POLL}\n"
        )),
    }
}

/// The demo's guest list with the cache-operator's module read from the
/// file `module` (the host runs on this machine).
fn guest_list_from_file(module: &Path) -> Value {
    guest_list(&format!("file: {}\n", module.display()))
}

/// The ConfigMap `wasmop-guests` listing the cache-operator whose
/// `module:` is `module` (its YAML lines after the key, the entry's other
/// keys at the entry's indent), with the demo's settings.
fn guest_list(module: &str) -> Value {
    let guests = format!(
        "guests:\n  - name: cache-operator\n    module:\n      {module}    settings: {{version: v1beta1}}\n"
    );
    serde_json::json!([{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "wasmop-guests", "namespace": NS},
        "data": {"guests.yaml": guests},
    }])
}

/// Waits until demo-cache's Deployment carries the version label `want`
/// (none: v1's children carry none), at most 60 s after `since`.
async fn version_shown(
    deployments: &Api<Deployment>,
    want: Option<&str>,
    since: Instant,
    log: &Path,
) -> Result<()> {
    loop {
        let d = deployments.get("demo-cache").await?;
        if d.labels()
            .get("apps.example.com/version")
            .map(String::as_str)
            == want
        {
            return Ok(());
        }
        if since.elapsed() > Duration::from_secs(60) {
            bail!(
                "demo-cache's version label never became {want:?}; host log: {}",
                log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The Lease of the cache-operator's work (its shard k's: `-<k>` added).
const GUEST_LEASE: &str = "wasmop-cache-operator";

/// The holder of the Lease `lease`, and whether it holds it now (renewed
/// within the lease's duration).
async fn unit_holder(client: &Client, lease: &str) -> Result<(String, bool)> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let started = Instant::now();
    loop {
        if let Some(spec) = leases.get_opt(lease).await?.and_then(|l| l.spec)
            && let Some(holder) = spec.holder_identity.filter(|h| !h.is_empty())
        {
            let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
            let live = spec.renew_time.is_some_and(|t| {
                t.0 + k8s_openapi::jiff::SignedDuration::from_secs(duration)
                    > k8s_openapi::jiff::Timestamp::now()
            });
            return Ok((holder, live));
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("no replica holds {NS}/{lease}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The leader-election identity a host's log names.
fn identity_in(log: &Path) -> Result<String> {
    let text = std::fs::read_to_string(log)?;
    text.lines()
        .filter(|l| l.contains("became the leader"))
        .find_map(|l| l.split("identity=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .with_context(|| format!("no identity in {}", log.display()))
}

/// Bindings of deploy/rbac/roles.yaml to the demo host's user.
fn user_bindings() -> Value {
    let subject = serde_json::json!([{"kind": "User", "name": "wasmop-host", "apiGroup": "rbac.authorization.k8s.io"}]);
    serde_json::json!([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "wasmop-demo-host"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wasmop"},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "wasmop-demo-host", "namespace": NS},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "wasmop"},
         "subjects": subject},
    ])
}

/// Server-side applies every document of a YAML file.
async fn apply_file(client: &Client, path: &Path, default_ns: &str) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("parsing {}", path.display()))?;
    apply_docs(client, &path.display().to_string(), docs, default_ns).await
}

/// Server-side applies a JSON list of objects.
async fn apply_value(client: &Client, docs: &Value, default_ns: &str) -> Result<()> {
    let docs = docs.as_array().cloned().unwrap_or_default();
    apply_docs(client, "the demo", docs, default_ns).await
}

async fn apply_docs(
    client: &Client,
    origin: &str,
    docs: Vec<Value>,
    default_ns: &str,
) -> Result<()> {
    let pp = PatchParams::apply(MANAGER).force();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let name = doc
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .context("object without a name")?
            .to_string();
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().unwrap_or_default());
        let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .with_context(|| format!("{origin}: {} {name}", gvk.kind))?;
        let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
            let ns = doc
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(default_ns);
            Api::namespaced_with(client.clone(), ns, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        api.patch(&name, &pp, &Patch::Apply(&doc))
            .await
            .with_context(|| format!("{origin}: applying {} {name}", gvk.kind))?;
    }
    Ok(())
}

/// Waits until the host pointed the CRD's conversion at itself and wrote
/// the guest's webhook configurations: before that, the API server cannot
/// store a Cache in the other version.
async fn webhooks_registered(client: &Client, log: &Path) -> Result<()> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let url = crds
            .get("caches.apps.example.com")
            .await?
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.url);
        let written = configs.get_opt("wasmop-cache-operator").await?.is_some();
        if let (Some(url), true) = (&url, written) {
            println!(
                "   webhooks registered: conversion at {url}, admission wasmop-cache-operator"
            );
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the host did not register its webhooks within 60 s; host log: {}",
                log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the guest's admission and conversion did: the sample as the
/// stored v1beta1, and a Cache with an untagged image refused.
async fn show_webhooks(client: &Client) -> Result<()> {
    let beta = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps.example.com", "v1beta1", "Cache"),
            "caches",
        ),
    );
    let stored = beta.get("demo-cache").await?;
    println!(
        "   conversion: demo-cache read as v1beta1 (stored): spec.ports {}, spec.config {}",
        stored.data["spec"]["ports"], stored.data["spec"]["config"]
    );
    let untagged: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
        "metadata": {"name": "untagged"}, "spec": {"image": "redis"},
    }))?;
    match cache_api(client)
        .create(&kube::api::PostParams::default(), &untagged)
        .await
    {
        Ok(_) => bail!("the guest's admission let a Cache with image `redis` in"),
        Err(kube::Error::Api(status)) => {
            println!(
                "   admission: a Cache with image `redis` is refused: {}",
                status.message
            );
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

fn cache_api_in(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps.example.com", "v1alpha1", "Cache"),
        "caches",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}
