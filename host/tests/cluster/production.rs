//! End to end on the real control plane: running wasmop in a cluster
//! (issue: highly available, observable, deployable). Leader election with
//! warm standbys and fencing, Prometheus metrics checked by Prometheus' own
//! parser, the probes, graceful shutdown, JSON logs, and `deploy/`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use kube::Client;
use kube::api::PostParams;
use serde_json::{Value, json};
use wasmop_testenv::harness::Test;
use wasmop_testenv::{TestEnv, Window};

use crate::support;
use crate::support::guests::{Entry, GuestList};
use crate::support::hostile::HostileHost;
use crate::support::{
    HostProcess, LEASE, LEASE_DURATION, guest_module, http_get, install_cache_crd, install_yaml,
    parse_prometheus, put_guest_list, put_module, sample, successful_writes_by, wait_for,
    workspace,
};

const LONG: Duration = Duration::from_secs(90);
const LIST: &str = "wasmop-guests";

/// A namespace with the CRD, the cache-operator in a module ConfigMap and a
/// guest list naming it.
async fn list_namespace(env: &TestEnv, prefix: &str) -> anyhow::Result<(Client, String)> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env.create_namespace(prefix).await?;
    put_module(
        &client,
        &ns,
        "cache-module",
        "module.wasm",
        &std::fs::read(guest_module("cache-operator")?)?,
    )
    .await?;
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([Entry::cache_operator(&ns)]).yaml(),
    )
    .await?;
    Ok((client, ns))
}

/// The writes each user made (2xx, the Lease left out), in the order the
/// API server received them.
fn write_timeline(env: &TestEnv, users: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let mut writes: Vec<(String, String)> = env
        .audit_events()?
        .into_iter()
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete")
            ) && e["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|c| c < 300)
                && e["objectRef"]["resource"] != "leases"
                // The claim on the guest's kind is the same whichever
                // replica writes it, and is not fenced (`claims`).
                && e["objectRef"]["resource"] != "customresourcedefinitions"
                && !is_host_duty(
                    e["objectRef"]["resource"].as_str().unwrap_or_default(),
                    e["objectRef"]["name"].as_str().unwrap_or_default(),
                )
        })
        .filter_map(|e| {
            let user = e["user"]["username"].as_str()?.to_owned();
            users.contains(&user).then(|| {
                (
                    e["requestReceivedTimestamp"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    user,
                )
            })
        })
        .collect();
    writes.sort();
    Ok(writes)
}

/// Whether a write of `resource` `name` is the host's own duty, done by
/// the holder of the host's Lease rather than the guest's: the guest
/// list's Events and rollout status.
fn is_host_duty(resource: &str, name: &str) -> bool {
    (resource == "events" && name.starts_with(&format!("{LIST}.")))
        || (resource == "configmaps" && name.starts_with(LIST))
}

/// The Lease of the cache-operator's work (the host's own Lease is
/// `wasmop`, the guest's `wasmop-cache-operator`).
const GUEST_LEASE: &str = "lease=wasmop-cache-operator ";

/// How many lines of the host's log say `message` of the Lease of `lease`
/// (a `lease=<name> ` field, which may end the line).
fn said_of_lease(host: &HostProcess, message: &str, lease: &str) -> usize {
    host.log()
        .lines()
        .filter(|l| l.contains(message) && format!("{l} ").contains(lease))
        .count()
}

/// How many times the host's log says it won the Lease of `lease`.
fn wins(host: &HostProcess, lease: &str) -> usize {
    said_of_lease(host, "became the leader", lease)
}

/// Which host leads the guest's work, once exactly one new one says so.
async fn the_leader(hosts: &mut [HostProcess], count_before: &[usize]) -> anyhow::Result<usize> {
    wait_for(LONG, || {
        let logs: Vec<usize> = hosts.iter().map(|h| wins(h, GUEST_LEASE)).collect();
        let before = count_before.to_vec();
        async move {
            let new: Vec<usize> = logs
                .iter()
                .zip(&before)
                .enumerate()
                .filter(|(_, (now, was))| now > was)
                .map(|(i, _)| i)
                .collect();
            match new.as_slice() {
                [one] => Ok(Some(*one)),
                [] => Ok(None),
                many => bail!("several hosts became leader: {many:?}"),
            }
        }
    })
    .await
}

async fn three_hosts_elect_one_writer_and_hand_over_without_two_writers(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns) = list_namespace(&env, "ha").await?;
    let mut users = Vec::new();
    let mut hosts = Vec::new();
    for i in 0..3 {
        let (user, kubeconfig) =
            support::least_privilege(&env, &format!("{ns}-{i}"), &ns, &["cache-operator"]).await?;
        let list_arg = format!("{ns}/{LIST}");
        let mut args = vec!["--guests-configmap", list_arg.as_str()];
        args.extend_from_slice(LEASE);
        if i == 2 {
            args.push("--readyz-requires-leader");
        }
        hosts.push(HostProcess::start(
            &env,
            &kubeconfig,
            &format!("{ns}-{i}"),
            &args,
        )?);
        users.push(user);
    }
    let leader = the_leader(&mut hosts, &[0, 0, 0]).await?;
    for name in ["c1", "c2", "c3"] {
        support::create_small_cache(&client, &ns, name).await?;
    }
    for name in ["c1", "c2", "c3"] {
        support::wait_ready(&client, &ns, name).await?;
    }
    // Exactly one identity writes.
    for (i, user) in users.iter().enumerate() {
        let writes = successful_writes_by(&env, user)?
            .into_iter()
            .filter(|(_, r, _, n)| r != "leases" && !is_host_duty(r, n))
            .count();
        ensure!(
            (i == leader) == (writes > 0),
            "host {i} (leader {leader}) made {writes} writes"
        );
    }
    // The standbys are warm (their guest is loaded, their caches synced)
    // and ready, unless they want to be ready only as the leader.
    for (i, host) in hosts.iter_mut().enumerate().filter(|(i, _)| *i != leader) {
        host.wait_for_log("controller started", LONG)
            .await
            .with_context(|| format!("standby {i} is not warm"))?;
        let probes = host.endpoint("probes").await?;
        // Ready only as the holder of the host's own Lease, for host 2.
        let waits_for_lease = i == 2 && wins(host, "lease=wasmop ") == 0;
        // Warm: its caches sync although it reconciles nothing.
        if !waits_for_lease {
            wait_for(LONG, || async {
                let (code, body) = http_get(probes, "/readyz").await?;
                Ok((code == 200).then_some(body))
            })
            .await
            .with_context(|| format!("standby {i} never became ready"))?;
        }
        let (code, body) = http_get(probes, "/readyz").await?;
        if waits_for_lease {
            ensure!(
                code == 500 && body.contains("not the leader"),
                "standby {i}: {code} {body}"
            );
        } else {
            ensure!(code == 200, "standby {i} is not ready: {code} {body}");
        }
    }

    // kill -9 of the leader: a standby takes over once the lease expires.
    let became: Vec<usize> = hosts.iter().map(|h| wins(h, GUEST_LEASE)).collect();
    hosts[leader].stop();
    let killed = Instant::now();
    for name in ["k1", "k2", "k3"] {
        support::create_small_cache(&client, &ns, name).await?;
    }
    let second = the_leader(&mut hosts, &became).await?;
    ensure!(second != leader, "the killed host came back as leader");
    wait_for(LONG, || async {
        Ok((successful_writes_by(&env, &users[second])?
            .iter()
            .any(|(_, r, _, _)| r != "leases"))
        .then_some(()))
    })
    .await?;
    let takeover = killed.elapsed();
    for name in ["k1", "k2", "k3"] {
        support::wait_ready(&client, &ns, name).await?;
    }
    eprintln!(
        "kill -9 of the leader: the new leader wrote after {:.2} s (lease {LEASE_DURATION:?})",
        takeover.as_secs_f64()
    );
    ensure!(
        takeover <= LEASE_DURATION + Duration::from_secs(3),
        "takeover after kill -9 took {takeover:?}, more than the lease duration + 2 s (and 1 s of slack)"
    );

    // SIGTERM of the leader: it releases the lease; the last host takes
    // over without waiting for it to expire.
    let third = (0..3)
        .find(|i| *i != leader && *i != second)
        .expect("three hosts");
    let became: Vec<usize> = hosts.iter().map(|h| wins(h, GUEST_LEASE)).collect();
    let terminated = Instant::now();
    let status = hosts[second].terminate(Duration::from_secs(40))?;
    ensure!(status.success(), "SIGTERM: the host exited with {status}");
    // The guest's Lease, which a host that holds no other may hold alone.
    ensure!(
        said_of_lease(&hosts[second], "released the lease", GUEST_LEASE) > 0,
        "the guest's lease was not released"
    );
    let next = the_leader(&mut hosts, &became).await?;
    let handover = terminated.elapsed();
    ensure!(next == third, "host {next} took over, expected {third}");
    eprintln!(
        "SIGTERM of the leader: host {third} leads {:.2} s later",
        handover.as_secs_f64()
    );
    ensure!(
        handover <= Duration::from_secs(3),
        "handover after SIGTERM took {handover:?}"
    );
    support::create_small_cache(&client, &ns, "t1").await?;
    support::wait_ready(&client, &ns, "t1").await?;

    // At no moment did two identities write: each one's writes are one
    // block in the API server's timeline.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let timeline = write_timeline(&env, &users)?;
    let mut blocks: Vec<&str> = Vec::new();
    for (_, user) in &timeline {
        if blocks.last() != Some(&user.as_str()) {
            blocks.push(user);
        }
    }
    let distinct: BTreeSet<&&str> = blocks.iter().collect();
    ensure!(
        distinct.len() == blocks.len(),
        "two identities wrote in turns (a fencing failure): {blocks:?}"
    );
    ensure!(
        blocks.len() == 3,
        "expected three leaders in turn, got {blocks:?}"
    );
    Ok(())
}

async fn metrics_follow_reconciles_failures_and_swaps_under_controller_runtimes_names(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns) = list_namespace(&env, "metrics").await?;
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    support::put_hostile_module(&client, &ns).await?;
    let entries = GuestList::of([Entry::cache_operator(&ns), Entry::hostile(&ns)]);
    put_guest_list(&client, &ns, LIST, &entries.yaml()).await?;
    let (_, kubeconfig) = support::admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let list_arg = format!("{ns}/{LIST}");
    let mut args = vec!["--guests-configmap", list_arg.as_str()];
    args.extend_from_slice(LEASE);
    let mut host = HostProcess::start(&env, &kubeconfig, &ns, &args)?;
    let metrics = host.endpoint("metrics").await?;
    host.wait_for_log("became the leader", LONG).await?;
    support::create_small_cache(&client, &ns, "m").await?;
    support::wait_ready(&client, &ns, "m").await?;
    let hostile = serde_json::from_value(
        json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
        "metadata": {"name": "boom"}, "spec": {"attack": "panic"}}),
    )?;
    support::hostiles(&client, &ns)
        .create(&PostParams::default(), &hostile)
        .await?;
    support::wait_for_event(&client, &ns, "boom", "GuestTrap", LONG).await?;
    let scrape = || async {
        let (code, text) = http_get(metrics, "/metrics").await?;
        ensure!(code == 200, "/metrics answered {code}");
        parse_prometheus(&text)
    };
    let before = scrape().await?;
    let v2 = std::fs::read(guest_module("cache-operator-v2")?)?;
    let v2_digest = wasmop_host::runtime::cache::digest(&v2);
    put_module(&client, &ns, "cache-module", "module.wasm", &v2).await?;
    host.wait_for_log("swapped guest module", LONG).await?;
    support::create_small_cache(&client, &ns, "m2").await?;
    support::wait_ready(&client, &ns, "m2").await?;
    let after = scrape().await?;

    let co = [("controller", "cache-operator")];
    let queue = [("name", "cache-operator"), ("controller", "cache-operator")];
    for (family, name, labels) in [
        (
            "controller_runtime_reconcile",
            "controller_runtime_reconcile_total",
            &[("controller", "cache-operator"), ("result", "success")][..],
        ),
        (
            "controller_runtime_reconcile_errors",
            "controller_runtime_reconcile_errors_total",
            &[("controller", "hostile")][..],
        ),
        (
            "controller_runtime_terminal_reconcile_errors",
            "controller_runtime_terminal_reconcile_errors_total",
            &co[..],
        ),
        (
            "controller_runtime_reconcile_time_seconds",
            "controller_runtime_reconcile_time_seconds_count",
            &co[..],
        ),
        (
            "controller_runtime_max_concurrent_reconciles",
            "controller_runtime_max_concurrent_reconciles",
            &co[..],
        ),
        (
            "controller_runtime_active_workers",
            "controller_runtime_active_workers",
            &co[..],
        ),
        ("workqueue_depth", "workqueue_depth", &queue[..]),
        ("workqueue_adds", "workqueue_adds_total", &queue[..]),
        (
            "workqueue_queue_duration_seconds",
            "workqueue_queue_duration_seconds_count",
            &queue[..],
        ),
        (
            "workqueue_work_duration_seconds",
            "workqueue_work_duration_seconds_count",
            &queue[..],
        ),
        (
            "workqueue_retries",
            "workqueue_retries_total",
            &[("name", "hostile"), ("controller", "hostile")][..],
        ),
        (
            "workqueue_unfinished_work_seconds",
            "workqueue_unfinished_work_seconds",
            &queue[..],
        ),
        (
            "workqueue_longest_running_processor_seconds",
            "workqueue_longest_running_processor_seconds",
            &queue[..],
        ),
        (
            "leader_election_master_status",
            "leader_election_master_status",
            &[("name", "wasmop")][..],
        ),
        (
            "rest_client_requests",
            "rest_client_requests_total",
            &[
                ("method", "PATCH"),
                ("code", "200"),
                ("controller", "cache-operator"),
            ][..],
        ),
        (
            "process_resident_memory_bytes",
            "process_resident_memory_bytes",
            &[][..],
        ),
        ("process_cpu_seconds", "process_cpu_seconds_total", &[][..]),
        ("process_open_fds", "process_open_fds", &[][..]),
        ("wasmop_runtime_tasks", "wasmop_runtime_tasks", &[][..]),
        (
            "wasmop_guest_info",
            "wasmop_guest_info",
            &[("guest", "cache-operator"), ("sha256", v2_digest.as_str())][..],
        ),
        (
            "wasmop_guest_call_duration_seconds",
            "wasmop_guest_call_duration_seconds_count",
            &[("guest", "cache-operator"), ("export", "reconcile")][..],
        ),
        (
            "wasmop_guest_failures",
            "wasmop_guest_failures_total",
            &[("guest", "hostile"), ("reason", "GuestTrap")][..],
        ),
        (
            "wasmop_guest_swaps",
            "wasmop_guest_swaps_total",
            &[("guest", "cache-operator"), ("result", "success")][..],
        ),
        (
            "wasmop_module_compile_seconds",
            "wasmop_module_compile_seconds_count",
            &[][..],
        ),
        (
            "wasmop_writes_skipped",
            "wasmop_writes_skipped_total",
            &[("guest", "cache-operator")][..],
        ),
    ] {
        ensure!(
            sample(&after, family, name, labels).is_some(),
            "{name}{labels:?} is missing; families: {:?}",
            after.as_object().map(|m| m.keys().collect::<Vec<_>>())
        );
    }
    let moved = |family: &str, name: &str, labels: &[(&str, &str)]| {
        sample(&after, family, name, labels).unwrap_or(0.0)
            - sample(&before, family, name, labels).unwrap_or(0.0)
    };
    ensure!(
        moved(
            "controller_runtime_reconcile",
            "controller_runtime_reconcile_total",
            &[("controller", "cache-operator"), ("result", "success")]
        ) > 0.0,
        "no reconcile counted"
    );
    ensure!(
        moved(
            "wasmop_guest_swaps",
            "wasmop_guest_swaps_total",
            &[("guest", "cache-operator"), ("result", "success")]
        ) >= 1.0,
        "the swap was not counted"
    );
    ensure!(
        sample(
            &after,
            "wasmop_guest_failures",
            "wasmop_guest_failures_total",
            &[("guest", "hostile"), ("reason", "GuestTrap")]
        )
        .unwrap_or(0.0)
            >= 1.0,
        "the trap was not counted"
    );
    ensure!(
        sample(
            &after,
            "leader_election_master_status",
            "leader_election_master_status",
            &[("name", "wasmop")]
        ) == Some(1.0),
        "the leader gauge is not 1"
    );
    // The old version's info is gone: one version per guest.
    let versions = after["wasmop_guest_info"]["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["labels"]["guest"] == "cache-operator")
        .count();
    ensure!(
        versions == 1,
        "{versions} versions of cache-operator in wasmop_guest_info"
    );
    Ok(())
}

async fn readyz_waits_for_every_guest_and_its_caches(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let (client, ns) = list_namespace(&env, "ready").await?;
    // A second entry whose module does not exist: not ready.
    let broken = GuestList::of([
        Entry::cache_operator(&ns),
        Entry::config_map("missing", "no-such-module").namespaces([&ns]),
    ]);
    put_guest_list(&client, &ns, LIST, &broken.yaml()).await?;
    let (_, kubeconfig) = support::admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &["--guests-configmap", &format!("{ns}/{LIST}")],
    )?;
    let probes = host.endpoint("probes").await?;
    let (code, body) = http_get(probes, "/healthz").await?;
    ensure!(code == 200 && body == "ok", "/healthz: {code} {body}");
    wait_for(LONG, || async {
        let (code, body) = http_get(probes, "/readyz").await?;
        Ok((code == 500 && body.contains("guest \"missing\" did not load")).then_some(()))
    })
    .await
    .context("a guest that does not load must make the host unready")?;
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([Entry::cache_operator(&ns)]).yaml(),
    )
    .await?;
    wait_for(LONG, || async {
        let (code, body) = http_get(probes, "/readyz").await?;
        Ok((code == 200).then_some(body))
    })
    .await
    .context("the host did not become ready once every guest loaded")?;

    // Caches that cannot sync (the host may not list Services): not ready.
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use kube::api::{Api, Patch, PatchParams};
    let blind_ns = env.create_namespace("blind").await?;
    let (_, kubeconfig) =
        support::least_privilege(&env, &blind_ns, &blind_ns, &["cache-operator"]).await?;
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let mut role = roles.get(&format!("wasmop-{blind_ns}")).await?;
    role.rules
        .get_or_insert_with(Vec::new)
        .retain(|r| !r.resources.iter().flatten().any(|x| x == "services"));
    role.metadata.managed_fields = None;
    roles
        .patch(
            &format!("wasmop-{blind_ns}"),
            &PatchParams::apply("wasmop-tests").force(),
            &Patch::Apply(&role),
        )
        .await?;
    let module = guest_module("cache-operator")?;
    let mut blind = HostProcess::start(
        &env,
        &kubeconfig,
        &blind_ns,
        &[
            "--guest",
            &format!("cache-operator={}", module.display()),
            "--namespace",
            &blind_ns,
        ],
    )?;
    let probes = blind.endpoint("probes").await?;
    blind
        .wait_for_log("watch of a child kind failed", LONG)
        .await?;
    let (code, body) = http_get(probes, "/readyz").await?;
    ensure!(
        code == 500 && body.contains("caches not synced"),
        "/readyz with a blind cache: {code} {body}"
    );
    Ok(())
}

async fn sigterm_lets_running_reconciles_finish_and_exits_zero(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let HostileHost {
        client,
        ns,
        mut host,
        ..
    } = HostileHost::build(&env, "sigterm")
        .admin()
        .args(["--concurrency", "1"])
        .start()
        .await?;
    host.wait_for_log("controller started", LONG).await?;
    let api = support::hostiles(&client, &ns);
    for i in 0..4 {
        let obj = serde_json::from_value(
            json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
            "metadata": {"name": format!("slow-{i}")}, "spec": {"attack": "slow"}}),
        )?;
        api.create(&PostParams::default(), &obj).await?;
    }
    host.wait_for_log("reconcile started", LONG).await?;
    let status = host.terminate(Duration::from_secs(35))?;
    ensure!(status.success(), "SIGTERM: exit status {status}");
    let log = host.log();
    ensure!(
        log.contains("shutdown requested") && log.contains("wasmop host stopped"),
        "{log}"
    );
    // Every reconcile that started also ended.
    let spans = support::reconcile_spans(&log, "hostile");
    let started: BTreeSet<u64> = spans
        .iter()
        .filter(|(_, s)| *s)
        .map(|(id, _)| *id)
        .collect();
    let ended: BTreeSet<u64> = spans
        .iter()
        .filter(|(_, s)| !*s)
        .map(|(id, _)| *id)
        .collect();
    ensure!(
        started == ended,
        "reconciles cut off by the shutdown: started {started:?}, ended {ended:?}"
    );
    Ok(())
}

async fn json_logs_carry_the_reconcile_span(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env.create_namespace("json").await?;
    let (_, kubeconfig) = support::admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &[
            "--guest",
            &support::guest_arg("cache-operator")?,
            "--namespace",
            &ns,
            "--log-format",
            "json",
        ],
    )?;
    support::create_small_cache(&client, &ns, "j").await?;
    support::wait_ready(&client, &ns, "j").await?;
    host.wait_for_log("reconciled", LONG).await?;
    let log = host.log();
    let lines: Vec<Value> = log
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .with_context(|| format!("a log line is not JSON:\n{log}"))?;
    let guest_line = lines
        .iter()
        .find(|l| l["target"] == "wasmop::guest" && l["span"]["object"] == format!("{ns}/j"))
        .with_context(|| format!("no guest line in the reconcile span:\n{log}"))?;
    ensure!(
        guest_line["span"]["guest"] == "cache-operator" && guest_line["span"]["id"].is_number(),
        "{guest_line}"
    );
    Ok(())
}

/// An Event repeated on one object becomes one Event whose
/// `series.count` grows, keeping its first note; a Warning with the same
/// reason is an Event of its own; a repeat of an Event deleted meanwhile
/// starts a new one.
async fn repeated_events_join_one_series_on_the_api_server(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::Resource as _;
    use kube::api::{Api, DeleteParams};
    use wasmop_host::events::Events;
    use wasmop_host::model::{Event, EventType};

    let client = env.client();
    let ns = env.create_namespace("series").await?;
    let object: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "regarded"}}))?;
    let object = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &object)
        .await?;
    let regarding = object.object_ref(&());
    let events = Events::new(client.clone(), "series-test");
    let api: Api<K8sEvent> = Api::namespaced(client.clone(), &ns);
    let publish = |event_type: EventType, message: &str| {
        let event = Event {
            event_type,
            reason: "Tested".into(),
            message: message.into(),
        };
        events.publish(&regarding, &event, "Test");
    };
    // The Events about the object, once there are `n` and the Normal one
    // has reached `count` (1: no series yet).
    let written = |n: usize, count: i32| {
        let api = api.clone();
        async move {
            wait_for(LONG, || async {
                let list = api.list(&Default::default()).await?.items;
                let normal = list.iter().find(|e| e.type_.as_deref() == Some("Normal"));
                let seen = normal.map_or(0, |e| e.series.as_ref().map_or(1, |s| s.count));
                Ok((list.len() == n && seen == count).then_some(list))
            })
            .await
            .with_context(|| format!("waiting for {n} Events, the Normal one at count {count}"))
        }
    };
    publish(EventType::Normal, "first");
    let first = written(1, 1).await?;
    let name = first[0].metadata.name.clone().context("a name")?;
    ensure!(first[0].reporting_instance.as_deref() == Some("series-test"));
    ensure!(first[0].regarding.as_ref().and_then(|r| r.uid.clone()) == object.metadata.uid);
    // A series whose Event is gone starts over with a new Event.
    api.delete(&name, &DeleteParams::default()).await?;
    publish(EventType::Normal, "after deletion");
    let renewed = written(1, 1).await?;
    ensure!(renewed[0].metadata.name.as_ref() != Some(&name));
    ensure!(renewed[0].note.as_deref() == Some("after deletion"));
    let name = renewed[0].metadata.name.clone().context("a name")?;
    // The first repeat is written at once.
    publish(EventType::Normal, "second");
    written(1, 2).await?;
    // Later repeats are counted, not written, while the series goes on.
    publish(EventType::Normal, "third");
    publish(EventType::Warning, "warned");
    let both = written(2, 2).await?;
    ensure!(
        both.iter()
            .any(|e| e.type_.as_deref() == Some("Warning") && e.series.is_none())
    );
    let mut window = Window::new(Duration::from_secs(2));
    while window.next().await {
        let normal = api.get(&name).await?;
        let count = normal.series.as_ref().map_or(1, |s| s.count);
        ensure!(
            count == 2,
            "a later repeat was written at once: count {count}"
        );
    }
    // Closing the recorder writes the count it kept.
    events.close().await;
    let closed = api.get(&name).await?;
    ensure!(
        closed.series.as_ref().map(|s| s.count) == Some(3),
        "{:?}",
        closed.series
    );
    ensure!(
        closed.note.as_deref() == Some("after deletion"),
        "{:?}",
        closed.note
    );
    Ok(())
}

async fn deploy_installs_everything_and_grants_what_wasmop_rbac_prints(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    // The namespace first: a server-side dry run persists nothing, so the
    // namespaced objects would find no namespace.
    let kubectl = |args: &[&str]| {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .args(args)
            .current_dir(workspace())
            .output()
            .context("running kubectl (it is on this project's machines)")
    };
    let out = kubectl(&["apply", "--server-side", "-f", "deploy/host/namespace.yaml"])?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl(&[
        "apply",
        "-k",
        "deploy/",
        "--server-side",
        // Other tests of this control plane installed the Cache CRD with
        // its v1alpha1 version alone, under their own field manager.
        "--force-conflicts",
        "--dry-run=server",
    ])?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "kubectl apply -k deploy/ failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for object in [
        "namespace/wasmop-system",
        "customresourcedefinition.apiextensions.k8s.io/caches.apps.example.com",
        "serviceaccount/wasmop",
        "clusterrole.rbac.authorization.k8s.io/wasmop",
        "role.rbac.authorization.k8s.io/wasmop",
        "clusterrolebinding.rbac.authorization.k8s.io/wasmop",
        "rolebinding.rbac.authorization.k8s.io/wasmop",
        // The guest's identity (--guest-identity impersonate).
        "serviceaccount/wasmop-guest-cache-operator",
        "clusterrole.rbac.authorization.k8s.io/wasmop-guest-cache-operator",
        "clusterrolebinding.rbac.authorization.k8s.io/wasmop-guest-cache-operator",
        "configmap/wasmop-guests",
        "deployment.apps/wasmop",
        "poddisruptionbudget.policy/wasmop",
        "service/wasmop-metrics",
        "service/wasmop-webhook",
    ] {
        ensure!(
            stdout.contains(object),
            "{object} is not installed by deploy/:\n{stdout}"
        );
    }
    let out = kubectl(&["kustomize", "deploy/"])?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8(out.stdout)?)?;
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .context("no Deployment")?;
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    ensure!(deployment["spec"]["replicas"] == 3, "replicas");
    let args: Vec<&str> = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    ensure!(
        args.contains(&"--leader-elect"),
        "leader election is off in deploy/: {args:?}"
    );
    ensure!(
        args.contains(&"--guest-identity=impersonate"),
        "guests act under the host's identity in deploy/: {args:?}"
    );
    ensure!(
        args.contains(&"--webhook-host=wasmop-webhook.wasmop-system.svc:443")
            && args.contains(&"--webhook-cert-secret=wasmop-system/wasmop-webhook-tls"),
        "webhooks are off in deploy/: {args:?}"
    );
    ensure!(
        container["livenessProbe"]["httpGet"]["path"] == "/healthz"
            && container["readinessProbe"]["httpGet"]["path"] == "/readyz",
        "probes"
    );
    ensure!(
        pod["securityContext"]["runAsNonRoot"] == true
            && pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault",
        "pod security"
    );
    let sc = &container["securityContext"];
    ensure!(
        sc["readOnlyRootFilesystem"] == true
            && sc["capabilities"]["drop"] == json!(["ALL"])
            && sc["allowPrivilegeEscalation"] == false,
        "container security"
    );
    ensure!(
        container["resources"]["requests"].is_object()
            && container["resources"]["limits"].is_object(),
        "resources"
    );
    // What deploy/ grants is what `wasmop rbac` prints for its guests.
    let generated = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["rbac", "--guest-identity", "impersonate", "--guest"])
        .arg(support::guest_arg("cache-operator")?)
        .arg("--guest")
        .arg(format!(
            "cache-operator={}",
            guest_module("cache-operator-v2")?.display()
        ))
        .args(["--webhook-cert-secret", "wasmop-webhook-tls"])
        .output()?;
    let generated: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8(generated.stdout)?)?;
    for role in generated.iter().filter(|d| !d.is_null()) {
        let installed = docs
            .iter()
            .find(|d| {
                d["kind"] == role["kind"] && d["metadata"]["name"] == role["metadata"]["name"]
            })
            .with_context(|| {
                format!(
                    "deploy/ lacks the {} {}",
                    role["kind"], role["metadata"]["name"]
                )
            })?;
        for field in ["rules", "roleRef", "subjects"] {
            ensure!(
                installed[field] == role[field],
                "deploy/ has other {field} than wasmop rbac for the {} {}",
                role["kind"],
                role["metadata"]["name"]
            );
        }
    }
    Ok(())
}

/// A guest's `apiQPS`/`apiBurst` hold its own requests, and only its own:
/// the paced guest's requests are spread at its rate (the API server's
/// audit log, by User-Agent), while the other guest on the same host, with
/// no budget, is not held back.
async fn a_guests_api_budget_holds_its_own_requests_and_no_one_elses(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    const QPS: f64 = 2.0;
    const PARENTS: usize = 4;
    let client = env.client();
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let ns = env.create_namespace("budget").await?;
    support::put_hostile_module(&client, &ns).await?;
    let entry = |name: &str| Entry::config_map(name, "hostile-module").namespaces([&ns]);
    let list = GuestList::of([
        entry("paced").with("apiQPS", QPS).with("apiBurst", 1),
        entry("free").with("settings", json!({"primary": "HostileTwin"})),
    ]);
    put_guest_list(&client, &ns, "wasmop-guests", &list.yaml()).await?;
    let user = format!("wasmop-{ns}");
    let (_, kubeconfig) = support::admin_identity(&env, &user).await?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &["--guests-configmap", &format!("{ns}/wasmop-guests")],
    )?;
    host.wait_for_log("controller started", Duration::from_secs(90))
        .await?;
    let twins = support::dyn_api(
        &client,
        "test.wasmop.dev",
        "v1alpha1",
        "HostileTwin",
        "hostiletwins",
        &ns,
    );
    let hostiles = support::hostiles(&client, &ns);
    for i in 0..PARENTS {
        // Names of their own: each guest's child is `<name>-ok`.
        for (api, kind, prefix) in [(&hostiles, "Hostile", "h"), (&twins, "HostileTwin", "t")] {
            let obj = serde_json::from_value(json!({
                "apiVersion": "test.wasmop.dev/v1alpha1", "kind": kind,
                "metadata": {"name": format!("{prefix}{i}")}, "spec": {"attack": "none"},
            }))?;
            api.create(&PostParams::default(), &obj).await?;
        }
    }
    let done = |api: kube::Api<kube::api::DynamicObject>| async move {
        wait_for(Duration::from_secs(120), || async {
            let list = api.list(&Default::default()).await?;
            let ok = list.items.len() == PARENTS
                && list
                    .items
                    .iter()
                    .all(|o| o.data.pointer("/status/ok") == Some(&json!(true)));
            Ok(ok.then_some(()))
        })
        .await
    };
    done(twins.clone()).await.context("the free guest")?;
    done(hostiles.clone()).await.context("the paced guest")?;
    // Each request of a guest, by the time the API server received it.
    let times = |agent: &str| -> anyhow::Result<Vec<k8s_openapi::jiff::Timestamp>> {
        let mut times: Vec<_> = env
            .audit_events_of(&user)?
            .into_iter()
            .filter(|e| {
                e["userAgent"]
                    .as_str()
                    .is_some_and(|a| a.ends_with(&format!("guest/{agent}")))
            })
            .filter_map(|e| e["requestReceivedTimestamp"].as_str()?.parse().ok())
            .collect();
        times.sort();
        times.dedup();
        Ok(times)
    };
    let paced = times("paced")?;
    ensure!(
        paced.len() >= 8,
        "only {} requests of the paced guest",
        paced.len()
    );
    // One request a burst, then one every 1/QPS s: n requests take at
    // least (n - 1) / QPS s, whatever the machine's speed.
    let span = paced
        .last()
        .unwrap()
        .duration_since(*paced.first().unwrap());
    let least = (paced.len() - 1) as f64 / QPS * 0.9;
    ensure!(
        span.as_secs_f64() >= least,
        "{} requests of the paced guest within {:.1} s, its budget allows no fewer than {least:.1} s",
        paced.len(),
        span.as_secs_f64()
    );
    let free = times("free")?;
    ensure!(
        !free.is_empty(),
        "no request of the free guest in the audit log"
    );
    Ok(())
}

/// The tests of this module.
///
/// The HA test times the takeover of a killed leader against its lease
/// (within the lease duration and 3 s) and the handover on SIGTERM (3 s):
/// beside the other tests of the binary a loaded machine stretched the
/// takeover from 5.2–6.1 s to 7.4 s, so it runs alone.
pub fn tests() -> Vec<Test> {
    wasmop_testenv::tests![
        #[alone] three_hosts_elect_one_writer_and_hand_over_without_two_writers => Duration::from_secs(300),
        metrics_follow_reconciles_failures_and_swaps_under_controller_runtimes_names => Duration::from_secs(240),
        readyz_waits_for_every_guest_and_its_caches => Duration::from_secs(240),
        sigterm_lets_running_reconciles_finish_and_exits_zero,
        json_logs_carry_the_reconcile_span,
        repeated_events_join_one_series_on_the_api_server,
        a_guests_api_budget_holds_its_own_requests_and_no_one_elses => Duration::from_secs(240),
        deploy_installs_everything_and_grants_what_wasmop_rbac_prints,
    ]
}
