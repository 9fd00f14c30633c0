//! The demo's rollouts: a canary of a broken build that the host rolls back
//! by itself, `wasmop plan` of another version, and a canary that promotes.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::{NS, apply_value, cache_api, put_module_named, step};

/// More Caches beside demo-cache, so that a step's share is a part.
const MORE: usize = 4;

/// The entry of the demo's guest list with `module` (a ConfigMap) and
/// `rollout`.
fn list(module: &str, rollout: &str) -> Value {
    list_with(module, &format!("rollout: {{{rollout}}}"))
}

/// The entry of the demo's guest list with `module` (a ConfigMap) and
/// `shards` shards.
pub(super) fn sharded_list(module: &str, shards: u16) -> Value {
    list_with(module, &format!("shards: {shards}"))
}

/// The entry of the demo's guest list with `module` (a ConfigMap) and the
/// field `field`.
fn list_with(module: &str, field: &str) -> Value {
    serde_json::json!([{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "wasmop-guests", "namespace": NS},
        "data": {"guests.yaml": format!(
            "guests:\n  - name: cache-operator\n    module:\n      configMap: {{name: {module}, key: module.wasm}}\n    settings: {{version: v1beta1}}\n    {field}\n"
        )},
    }])
}

/// The guest's record in the status ConfigMap.
async fn record(client: &Client) -> Result<Value> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), NS)
        .get("wasmop-guests-status")
        .await?;
    let text = cm
        .data
        .and_then(|d| d.get("cache-operator").cloned())
        .context("no record of cache-operator")?;
    Ok(serde_saphyr::from_str(&text)?)
}

/// Prints each new state of the record until its phase is `until`.
async fn follow(client: &Client, until: &str, log: &Path) -> Result<Value> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let r = record(client).await?;
        let line = format!(
            "phase {}, step {}, {} parent(s) on the candidate, {} failed reconcile(s)",
            r["phase"].as_str().unwrap_or("?"),
            r["step"],
            r["parentsOnCandidate"],
            r["failedReconciles"]
        );
        if line != last {
            println!("   [{:>4.1}s] {line}", started.elapsed().as_secs_f64());
            last = line;
        }
        if r["phase"] == until {
            return Ok(r);
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!(
                "the rollout never reached {until}; host log: {}",
                log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `wasmop <args>` as the cluster's admin: its output, indented.
pub(super) fn wasmop(wasmop: &Path, kubeconfig: &Path, args: &[&str], lines: usize) -> Result<()> {
    let out = Command::new(wasmop)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .context("running wasmop")?;
    if out.status.code() == Some(1) {
        bail!(
            "wasmop {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let all: Vec<&str> = text.lines().collect();
    println!("   $ wasmop {}", args.join(" "));
    for line in all.iter().take(lines) {
        println!("   {line}");
    }
    if all.len() > lines {
        println!("   … ({} more lines)", all.len() - lines);
        println!("   {}", all.last().unwrap_or(&""));
    }
    Ok(())
}

/// Waits until every Cache of the demo is Ready.
async fn all_ready(client: &Client) -> Result<()> {
    let caches = cache_api(client);
    let started = Instant::now();
    loop {
        let ready = caches
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|c| c.data.pointer("/status/phase") == Some(&Value::from("Ready")))
            .count();
        if ready == MORE + 1 {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("{ready} of {} Caches Ready", MORE + 1);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Runs the rollout steps, numbered from `first`; returns the next step's
/// number.
pub async fn show(
    client: &Client,
    bin: &Path,
    admin: &Path,
    guest_dir: &Path,
    log: &Path,
    first: u32,
) -> Result<u32> {
    step(
        first,
        "roll out a broken build as a canary (10% of the Caches, watched for readiness): the host rolls it back by itself",
    );
    let caches = cache_api(client);
    for i in 1..=MORE {
        let cache: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": format!("demo-cache-{i}")},
            "spec": {"image": "redis:7.2", "replicas": 2},
        }))?;
        caches.create(&PostParams::default(), &cache).await?;
    }
    all_ready(client).await?;
    println!("   {} more Caches are Ready: 5 in all", MORE);
    for (cm, file) in [
        ("cache-operator-broken", "cache-operator-broken.wasm"),
        ("cache-operator-v1", "cache-operator.wasm"),
    ] {
        put_module_named(client, cm, &std::fs::read(guest_dir.join(file))?).await?;
    }
    apply_value(
        client,
        &list(
            "cache-operator-broken",
            "strategy: Canary, steps: [10, 50], stepDuration: 60s, readyCondition: Available, progressDeadline: 5s",
        ),
        NS,
    )
    .await?;
    println!(
        "   guest list: module cache-operator-broken (scales Deployments to zero), rollout Canary steps [10, 50], progressDeadline 5s"
    );
    let r = follow(client, "Aborted", log).await?;
    println!(
        "   rolled back: {}",
        r["reason"].as_str().unwrap_or_default()
    );
    all_ready(client).await?;
    println!("   every Cache is Ready again on the stable version");
    wasmop(
        bin,
        admin,
        &[
            "status",
            "--guests-configmap",
            "wasmop-system/wasmop-guests",
        ],
        5,
    )?;

    step(
        first + 1,
        "`wasmop plan` of v1 against the live cluster (read-only): what would change",
    );
    let v1 = guest_dir.join("cache-operator.wasm");
    let guest = format!("cache-operator={}", v1.display());
    wasmop(
        bin,
        admin,
        &[
            "plan",
            "--guest",
            &guest,
            "--guests-configmap",
            "wasmop-system/wasmop-guests",
        ],
        8,
    )?;

    step(
        first + 2,
        "roll v1 out as a canary that holds each step for 4 s: it is promoted",
    );
    apply_value(
        client,
        &list(
            "cache-operator-v1",
            "strategy: Canary, steps: [20, 60], stepDuration: 4s, readyCondition: Available, progressDeadline: 60s",
        ),
        NS,
    )
    .await?;
    follow(client, "Promoted", log).await?;
    all_ready(client).await?;
    wasmop(
        bin,
        admin,
        &[
            "status",
            "--guests-configmap",
            "wasmop-system/wasmop-guests",
        ],
        5,
    )?;
    Ok(first + 3)
}
