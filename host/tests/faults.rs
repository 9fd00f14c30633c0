//! Faults on the real control plane (issue: the control plane fails, the
//! host dies, nothing is lost). Each case runs 200 Caches with the
//! production setup (guest list ConfigMap, least-privilege identity, leader
//! election), injects one fault with the harness's process controls, and
//! ends with the same oracle: every Cache Ready at its generation, exactly
//! the desired children (none duplicated, orphaned or missing), no Cache
//! stuck Terminating, the host alive, and no write by the host once
//! converged. The cases fault the control plane they share, so they run one
//! at a time; each prints what the fault cost.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail, ensure};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::fleet::{Expect, Fleet, name};
use support::{caches, wait_for};
use wasmop_testenv::Window;
use wasmop_testenv::harness::run_in_sequence;
use wasmop_testenv::{Component, TestEnv};

/// Caches per case.
const CACHES: usize = 200;

/// The figure the issue asks for: the first reconcile after the API server
/// is back. Printed against it; the test asserts only the looser bound
/// below, which the minutes-long stall this suite was written for breaks.
const RESUME_TARGET: Duration = Duration::from_secs(5);
const RESUME_BOUND: Duration = Duration::from_secs(30);

fn report(case: &str, fault: &str, figures: &[(&str, Duration)]) {
    let figures: Vec<String> = figures
        .iter()
        .map(|(what, d)| format!("{what} {:.1} s", d.as_secs_f64()))
        .collect();
    eprintln!("faults: {case}: {fault}: {}", figures.join(", "));
}

/// Starts 200 Caches converging under a fresh host.
async fn converging(env: &Arc<TestEnv>, prefix: &str) -> anyhow::Result<Fleet> {
    let mut case = Fleet::new(env, prefix, CACHES).await?;
    case.start_host().await?;
    case.create_caches().await?;
    case.wait_converging().await?;
    Ok(case)
}

/// The API server back: how long until the host's first write, checked
/// against the bound and printed against the target.
async fn resumed(case: &Fleet, back: SystemTime) -> anyhow::Result<Duration> {
    let resume = case.first_write_after(back).await?;
    ensure!(
        resume <= RESUME_BOUND,
        "the host's first write came {resume:?} after the API server was back"
    );
    eprintln!(
        "faults: first write {:.2} s after the API server answered again (target {:.0} s: {})",
        resume.as_secs_f64(),
        RESUME_TARGET.as_secs_f64(),
        if resume <= RESUME_TARGET {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(resume)
}

async fn without_a_fault_two_hundred_caches_converge_and_the_oracle_holds(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut case = Fleet::new(&env, "fault-none", CACHES).await?;
    case.start_host().await?;
    let started = Instant::now();
    case.create_caches().await?;
    let took = case.converged(&Expect::first(CACHES), started).await?;
    report(
        "no fault",
        "200 Caches created",
        &[("converged after the first create", took)],
    );
    case.finish().await
}

/// A fault of the control plane, injected while the host converges.
struct Fault {
    /// The namespace prefix of the case.
    prefix: &'static str,
    /// The component the fault hits.
    component: Component,
    /// `kill -9` and a restart after `down`, or `SIGSTOP` and `SIGCONT`
    /// after `down`.
    kill: bool,
    down: Duration,
    /// How the report names the fault, and the moment the host's first
    /// write is measured from.
    what: &'static str,
    back: &'static str,
}

const API_SERVER_KILLED: Fault = Fault {
    prefix: "fault-apiserver",
    component: Component::KubeApiserver,
    kill: true,
    down: Duration::from_secs(3),
    what: "kube-apiserver kill -9, down 3 s, restarted",
    back: "first write after it answered",
};

const ETCD_KILLED: Fault = Fault {
    prefix: "fault-etcd",
    component: Component::Etcd,
    kill: true,
    down: Duration::from_secs(3),
    what: "etcd kill -9, down 3 s, restarted",
    back: "first write after the API server was ready",
};

const API_SERVER_PAUSED: Fault = Fault {
    prefix: "fault-pause",
    component: Component::KubeApiserver,
    kill: false,
    down: Duration::from_secs(20),
    what: "kube-apiserver SIGSTOP 20 s, SIGCONT",
    back: "first write after SIGCONT",
};

/// `fault` hits the control plane while the host converges: the host
/// writes again soon after the component is back, and converges with
/// nothing lost.
async fn during_convergence(env: Arc<TestEnv>, fault: Fault) -> anyhow::Result<()> {
    let mut case = converging(&env, fault.prefix).await?;
    let start = Instant::now();
    if fault.kill {
        env.kill(fault.component)?;
        tokio::time::sleep(fault.down).await;
        env.restart(fault.component).await?;
        env.wait_until_ready().await?;
    } else {
        env.pause(fault.component)?;
        tokio::time::sleep(fault.down).await;
        env.resume(fault.component)?;
    }
    let back = SystemTime::now();
    let resume = resumed(&case, back).await?;
    // So that the oracle judges the host, not kwok.
    env.kubelets_catch_up().await?;
    let took = case.converged(&Expect::first(CACHES), start).await?;
    report(
        fault.what,
        "during convergence",
        &[
            (fault.back, resume),
            ("converged after the fault began", took),
        ],
    );
    case.finish().await
}

async fn the_api_server_killed_and_restarted_during_convergence_loses_nothing(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    during_convergence(env, API_SERVER_KILLED).await
}

async fn etcd_killed_and_restarted_during_convergence_loses_nothing(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    during_convergence(env, ETCD_KILLED).await
}

async fn the_api_server_paused_for_twenty_seconds_during_convergence_loses_nothing(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    during_convergence(env, API_SERVER_PAUSED).await
}

async fn watches_that_get_410_after_a_compaction_re_list_and_miss_nothing(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut case = Fleet::new(&env, "fault-compaction", CACHES).await?;
    case.start_host().await?;
    case.create_caches().await?;
    case.converged(&Expect::first(CACHES), Instant::now())
        .await?;
    let before = caches(&case.client, &case.ns)
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .context("list resourceVersion")?;
    // The host holds its watches at resourceVersions from before what
    // follows: it is stopped while the Caches change, etcd forgets the
    // history and the API server's watch cache starts over.
    let pid = case.host()?.pid();
    signal(pid, rustix::process::Signal::STOP)?;
    let fault = Instant::now();
    let api = caches(&case.client, &case.ns);
    for i in (0..CACHES).step_by(4) {
        let patch = json!({"spec": {"config": {"round": "1"}}});
        api.patch(&name(i), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    for i in (1..CACHES).step_by(10) {
        Api::<Deployment>::namespaced(case.client.clone(), &case.ns)
            .delete(&name(i), &DeleteParams::default())
            .await?;
    }
    env.compact_etcd().await?;
    env.restart(Component::KubeApiserver).await?;
    // What the host's watches meet when they come back: 410 Gone.
    let mut probe = api
        .watch(&kube::api::WatchParams::default().timeout(5), &before)
        .await?
        .boxed();
    match probe.next().await {
        Some(Ok(kube::api::WatchEvent::Error(status))) if status.code == 410 => {}
        other => bail!("a watch from before the compaction got {other:?}, not 410"),
    }
    signal(pid, rustix::process::Signal::CONT)?;
    let took = case.converged(&Expect::first(CACHES), fault).await?;
    let log = case.host()?.log();
    ensure!(
        log.contains("410") || log.contains("too old resource version"),
        "the host never met a 410 (so the case tested nothing):\n{}",
        support::tail(&log, 30)
    );
    report(
        "etcd compaction + kube-apiserver restart while the host was stopped",
        "steady state, 50 specs changed and 20 Deployments deleted meanwhile",
        &[("converged after the changes", took)],
    );
    case.finish().await
}

fn signal(pid: u32, signal: rustix::process::Signal) -> anyhow::Result<()> {
    let pid = rustix::process::Pid::from_raw(pid as i32).context("pid")?;
    rustix::process::kill_process(pid, signal)?;
    Ok(())
}

async fn a_host_killed_during_convergence_converges_after_a_restart(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut case = converging(&env, "fault-host").await?;
    let fault = Instant::now();
    case.kill_host();
    case.start_host().await?;
    let took = case.converged(&Expect::first(CACHES), fault).await?;
    report(
        "host kill -9, restarted at once (new identity: waits for the lease)",
        "during convergence",
        &[("converged after the kill", took)],
    );
    case.finish().await
}

async fn a_host_killed_during_a_hot_swap_comes_back_on_the_new_version(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut case = Fleet::new(&env, "fault-swap", CACHES).await?;
    case.start_host().await?;
    case.create_caches().await?;
    case.converged(&Expect::first(CACHES), Instant::now())
        .await?;
    let mark = case.host()?.log().len();
    case.use_version("cache-operator-v2").await?;
    // Kill it while the swap is under way: the new version loaded, its
    // re-queued reconciles writing.
    wait_for(Duration::from_secs(60), || async {
        Ok(case
            .writes()
            .map(|w| w.iter().any(|(_, r, _, _)| r == "poddisruptionbudgets"))?
            .then_some(()))
    })
    .await
    .context("v2 never wrote")?;
    ensure!(
        case.host()?.log()[mark..].contains("swapped"),
        "no swap logged"
    );
    let fault = Instant::now();
    case.kill_host();
    case.start_host().await?;
    let expect = Expect {
        v2: true,
        ..Expect::first(CACHES)
    };
    let took = case.converged(&expect, fault).await?;
    report(
        "host kill -9 during a v1 -> v2 swap, restarted",
        "swap half done",
        &[("converged on v2 after the kill", took)],
    );
    case.finish().await
}

async fn a_host_killed_during_fifty_finalizers_completes_them_after_a_restart(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut case = Fleet::new(&env, "fault-finalizers", CACHES).await?;
    case.start_host().await?;
    case.create_caches().await?;
    case.converged(&Expect::first(CACHES), Instant::now())
        .await?;
    let api = caches(&case.client, &case.ns);
    let doomed: Vec<String> = (0..50).map(|i| name(i * 4)).collect();
    for n in &doomed {
        api.delete(n, &DeleteParams::default()).await?;
    }
    // Kill it once it has started on them, not before.
    case.host()?
        .wait_for_log("finalized", Duration::from_secs(60))
        .await?;
    let fault = Instant::now();
    case.kill_host();
    let gone_before = {
        let names: BTreeSet<String> = api
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        doomed.iter().filter(|n| !names.contains(*n)).count()
    };
    case.start_host().await?;
    let mut expect = Expect::first(CACHES);
    for n in &doomed {
        expect.names.remove(n);
    }
    let took = case.converged(&expect, fault).await?;
    report(
        "host kill -9 during 50 finalizers, restarted",
        &format!("{gone_before} of 50 finalized before the kill"),
        &[("all 50 gone after the kill", took)],
    );
    case.finish().await
}

async fn caches_deleted_while_the_host_is_down_are_finalized_when_it_returns(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut case = Fleet::new(&env, "fault-down", CACHES).await?;
    case.start_host().await?;
    case.create_caches().await?;
    case.converged(&Expect::first(CACHES), Instant::now())
        .await?;
    case.kill_host();
    let api = caches(&case.client, &case.ns);
    let doomed: Vec<String> = (0..50).map(|i| name(i * 4 + 1)).collect();
    for n in &doomed {
        api.delete(n, &DeleteParams::default()).await?;
    }
    // The finalizer holds them while no host runs.
    let mut window = Window::new(Duration::from_secs(2));
    while window.next().await {
        let terminating = api
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
            .count();
        ensure!(
            terminating == 50,
            "{terminating} Caches Terminating, want 50"
        );
    }
    let fault = Instant::now();
    case.start_host().await?;
    let mut expect = Expect::first(CACHES);
    for n in &doomed {
        expect.names.remove(n);
    }
    let took = case.converged(&expect, fault).await?;
    report(
        "50 Caches deleted while no host ran",
        "host started again",
        &[("all 50 finalized after the start", took)],
    );
    case.finish().await
}

async fn a_field_manager_fighting_the_host_meets_its_backoff_and_loses_when_it_stops(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut case = Fleet::new(&env, "fault-fight", CACHES).await?;
    case.start_host().await?;
    case.create_caches().await?;
    case.converged(&Expect::first(CACHES), Instant::now())
        .await?;
    let target = name(7);
    let deployments: Api<Deployment> = Api::namespaced(case.client.clone(), &case.ns);
    let host_writes = |case: &Fleet| -> anyhow::Result<usize> {
        Ok(case
            .writes()?
            .iter()
            .filter(|(_, r, s, n)| r == "deployments" && s.is_empty() && *n == target)
            .count())
    };
    let before = host_writes(&case)?;
    let all_before = case.writes()?.len();
    let fight = Instant::now();
    let mut theirs = 0;
    let params = PatchParams {
        field_manager: Some("fighter".into()),
        ..PatchParams::default()
    };
    while fight.elapsed() < Duration::from_secs(30) {
        deployments
            .patch(
                &target,
                &params,
                &Patch::Merge(&json!({"spec": {"replicas": 2}})),
            )
            .await?;
        theirs += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stopped = Instant::now();
    // The host wins once the fight stops.
    wait_for(Duration::from_secs(120), || async {
        let d = deployments.get(&target).await?;
        Ok((d.spec.and_then(|s| s.replicas) == Some(1)).then_some(()))
    })
    .await
    .context("the host never took spec.replicas back")?;
    let won = stopped.elapsed();
    let ours = host_writes(&case)? - before;
    let all = case.writes()?.len() - all_before;
    ensure!(
        ours <= 20,
        "the host wrote the contested Deployment {ours} times against {theirs} foreign writes"
    );
    let took = case.converged(&Expect::first(CACHES), fight).await?;
    eprintln!(
        "faults: fight over spec.replicas for 30 s: {theirs} foreign writes, {ours} by the host on that Deployment ({all} in all); won {:.1} s after the fight stopped",
        won.as_secs_f64()
    );
    report(
        "a field manager fighting for 30 s",
        "steady state",
        &[("converged after the fight began", took)],
    );
    case.finish().await
}

fn main() -> std::process::ExitCode {
    let long = Duration::from_secs(900);
    run_in_sequence(wasmop_testenv::tests![
        without_a_fault_two_hundred_caches_converge_and_the_oracle_holds => long,
        the_api_server_killed_and_restarted_during_convergence_loses_nothing => long,
        etcd_killed_and_restarted_during_convergence_loses_nothing => long,
        the_api_server_paused_for_twenty_seconds_during_convergence_loses_nothing => long,
        watches_that_get_410_after_a_compaction_re_list_and_miss_nothing => long,
        a_host_killed_during_convergence_converges_after_a_restart => long,
        a_host_killed_during_a_hot_swap_comes_back_on_the_new_version => long,
        a_host_killed_during_fifty_finalizers_completes_them_after_a_restart => long,
        caches_deleted_while_the_host_is_down_are_finalized_when_it_returns => long,
        a_field_manager_fighting_the_host_meets_its_backoff_and_loses_when_it_stops => long,
    ])
}
