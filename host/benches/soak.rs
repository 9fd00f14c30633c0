//! Soak: the host under continuous change on the real control plane.
//! Caches are created, updated and deleted all the time (50 operations a
//! minute: 10 creates, 10 deletes and 30 updates, so about 60 Caches stay
//! alive, each deleted one with its finalizer), the guest is swapped between v1 and v2
//! every minute, and kube-apiserver is killed and restarted half-way. Every
//! minute the host's resident memory, open fds, threads, live tokio tasks
//! and work-queue depth are printed; at the end the fault suite's oracle
//! gives its verdict. Targets: resident memory after the first two minutes
//! grows by at most 10%, fds and tasks stay flat, the verdict is clean.
//!
//! `cargo xtask bench soak` (10 minutes and 60 Caches;
//! `WASMOP_SOAK_MINUTES=n` and `WASMOP_SOAK_CACHES=n` for others).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::caches;
use support::fleet::{Expect, Fleet, name};
use wasmop_testenv::{Component, TestEnv};

/// Caches alive at the start by default; the churn keeps between two
/// thirds and twice that many.
const DEFAULT_CACHES: usize = 60;
/// One operation per tick: 50 a minute.
const TICK: Duration = Duration::from_millis(1200);

/// One minute's figures.
#[derive(Debug, Clone, Copy)]
struct Sample {
    rss_kib: u64,
    fds: usize,
    threads: usize,
    tasks: f64,
    queue: f64,
}

fn proc_figures(pid: u32) -> (u64, usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let count =
        |dir: &str| std::fs::read_dir(format!("/proc/{pid}/{dir}")).map_or(0, Iterator::count);
    (rss, count("fd"), count("task"))
}

/// The sum of every sample of `family` in a Prometheus text exposition.
fn metric_sum(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with(['{', ' ']))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn sample(fleet: &mut Fleet, metrics: std::net::SocketAddr) -> Sample {
    let pid = fleet.host().expect("host").pid();
    let (rss_kib, fds, threads) = proc_figures(pid);
    let text = support::http_get(metrics, "/metrics")
        .await
        .map(|(_, body)| body)
        .unwrap_or_default();
    Sample {
        rss_kib,
        fds,
        threads,
        tasks: metric_sum(&text, "wasmop_runtime_tasks"),
        queue: metric_sum(&text, "workqueue_depth"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let minutes: u64 = std::env::var("WASMOP_SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(10)
        .max(3);
    let env = Arc::new(TestEnv::start().await?);
    let start: usize = std::env::var("WASMOP_SOAK_CACHES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_CACHES)
        .max(3);
    let (min_alive, max_alive) = (start * 2 / 3, start * 2);
    let mut fleet = Fleet::new(&env, "soak", start).await?;
    fleet.start_host().await?;
    let metrics = fleet.host()?.endpoint("metrics").await?;
    fleet.create_caches().await?;
    fleet
        .converged(&Expect::first(start), Instant::now())
        .await?;
    println!(
        "soak: {minutes} min, {start} Caches to start, 10 creates, 10 deletes and 30 updates a minute (bounds {min_alive}..{max_alive}), one swap a minute, one kube-apiserver restart at {} min",
        minutes / 2
    );
    println!("  min   rss MiB   fds  threads  tasks  queue  alive  flavor");

    let api = caches(&fleet.client, &fleet.ns);
    let mut alive: BTreeSet<usize> = (0..start).collect();
    let mut next = start;
    let mut v2 = false;
    let mut samples = Vec::new();
    let started = Instant::now();
    let mut tick = 0u64;
    let mut restarted = false;
    let mut minute = 0;
    while started.elapsed() < Duration::from_secs(minutes * 60) {
        tick += 1;
        let op = tick % 5;
        // One create and one delete every five ticks keep the number of
        // Caches about level, so memory compares like with like; the other
        // ticks update a Cache's config (which rolls its pods).
        let creates = op == 0 && alive.len() < max_alive;
        let result = match op {
            0 if creates => {
                let created = fleet.create_range(next..next + 1).await;
                alive.insert(next);
                next += 1;
                created
            }
            2 if alive.len() > min_alive => {
                let i = alive.pop_first().expect("alive");
                api.delete(&name(i), &DeleteParams::default())
                    .await
                    .map(drop)
                    .map_err(Into::into)
            }
            _ => {
                let i = *alive
                    .iter()
                    .nth((tick as usize * 7) % alive.len())
                    .expect("alive");
                let patch = json!({"spec": {"config": {"round": tick.to_string()}}});
                api.patch(&name(i), &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(drop)
                    .map_err(Into::into)
            }
        };
        // The churn runs on through the API server's restart: a failed
        // operation is left as it is (a create that failed is no Cache).
        if let Err(e) = result {
            eprintln!("  (operation failed: {e:#})");
            if creates {
                alive.remove(&(next - 1));
            }
        }
        let elapsed = started.elapsed();
        if !restarted && elapsed >= Duration::from_secs(minutes * 30) {
            restarted = true;
            env.kill(Component::KubeApiserver)?;
            tokio::time::sleep(Duration::from_secs(3)).await;
            env.restart(Component::KubeApiserver).await?;
            env.kubelets_catch_up().await?;
            println!(
                "  (kube-apiserver killed and restarted at {:.1} min)",
                elapsed.as_secs_f64() / 60.0
            );
        }
        if elapsed >= Duration::from_secs((minute + 1) * 60) {
            minute += 1;
            let s = sample(&mut fleet, metrics).await;
            println!(
                "  {minute:>3}  {:>8.1}  {:>4}  {:>7}  {:>5}  {:>5}  {:>5}  {}",
                s.rss_kib as f64 / 1024.0,
                s.fds,
                s.threads,
                s.tasks,
                s.queue,
                alive.len(),
                if v2 { "v2" } else { "v1" }
            );
            samples.push(s);
            v2 = !v2;
            fleet
                .use_version(if v2 {
                    "cache-operator-v2"
                } else {
                    "cache-operator"
                })
                .await?;
        }
        tokio::time::sleep(TICK).await;
    }

    // The verdict: converged on the last version, with exactly the Caches
    // alive, and the figures flat after the first two minutes.
    let expect = Expect {
        names: alive.iter().map(|i| name(*i)).collect(),
        v2,
    };
    let oracle = fleet.converged(&expect, Instant::now()).await;
    let last = sample(&mut fleet, metrics).await;
    let base = samples.get(1).copied().unwrap_or(last);
    let rss_growth = last.rss_kib as f64 / base.rss_kib.max(1) as f64 - 1.0;
    let fds_flat = last.fds <= base.fds + (base.fds / 10).max(5);
    let tasks_flat = last.tasks <= base.tasks * 1.1 + 5.0;
    println!(
        "soak: rss {:.1} MiB at minute 2, {:.1} MiB at the end: {:+.1}% (target <= +10%: {})",
        base.rss_kib as f64 / 1024.0,
        last.rss_kib as f64 / 1024.0,
        rss_growth * 100.0,
        if rss_growth <= 0.10 { "met" } else { "NOT met" }
    );
    println!(
        "soak: fds {} -> {} ({}), tasks {} -> {} ({}), threads {} -> {}",
        base.fds,
        last.fds,
        if fds_flat { "flat" } else { "NOT flat" },
        base.tasks,
        last.tasks,
        if tasks_flat { "flat" } else { "NOT flat" },
        base.threads,
        last.threads
    );
    match &oracle {
        Ok(took) => println!(
            "soak: verdict clean: {} Caches Ready with exactly their children, nothing Terminating, the host alive, no write once converged ({:.1} s after the churn stopped)",
            expect.names.len(),
            took.as_secs_f64()
        ),
        Err(e) => println!("soak: verdict NOT clean: {e:#}"),
    }
    fleet.finish().await?;
    oracle.map(drop)
}
