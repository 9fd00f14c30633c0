//! End to end on the real control plane: rollouts of operator logic (a
//! broken canary rolled back by itself, v2 shadowed then promoted by a
//! canary, `wasmop plan` and `wasmop status`, a rollout resumed by a
//! standby and by a restarted host).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use wasmop_testenv::TestEnv;
use wasmop_testenv::harness::Test;

use crate::support;
use crate::support::guests::{Entry, GuestList};
use crate::support::{
    HostProcess, LEASE, admin_identity, caches, create_small_cache, events_about, guest_module,
    http_get, install_cache_crd, parse_prometheus, put_guest_list, put_module, sample, sha256_hex,
    timed_successful_writes_by, wait_for, wait_for_event,
};

const LONG: Duration = Duration::from_secs(120);
const LIST: &str = "wasmop-guests";
const STATUS: &str = "wasmop-guests-status";
const GUEST: &str = "cache-operator";

/// A canary over 10 % and 50 % of the parents, each step `step` long.
fn canary(step: &str, progress_deadline: &str) -> Value {
    json!({
        "strategy": "Canary",
        "steps": [10, 50],
        "stepDuration": step,
        "readyCondition": "Available",
        "progressDeadline": progress_deadline,
    })
}

/// A canary whose first step outlasts any test: only a failure ends it.
fn canary_watched() -> Value {
    canary("10m", "10s")
}

/// A canary that promotes within seconds when nothing fails.
fn canary_quick() -> Value {
    canary("3s", "60s")
}

fn shadow() -> Value {
    json!({"strategy": "Shadow"})
}

/// A namespace with the Cache CRD, the cache-operator's three builds in
/// module ConfigMaps (`cache-module`, `cache-module-v2`,
/// `cache-module-broken`), a guest list naming v1, `n` Caches Ready under
/// it, and a host (its own admin user, for the audit log) following the
/// list.
struct Case {
    env: Arc<TestEnv>,
    client: Client,
    ns: String,
    user: String,
    kubeconfig: PathBuf,
    hosts: Vec<HostProcess>,
    names: Vec<String>,
}

impl Case {
    async fn new(
        env: &Arc<TestEnv>,
        prefix: &str,
        n: usize,
        rollout: Option<Value>,
    ) -> anyhow::Result<Self> {
        Self::with_hosts(env, prefix, n, rollout, &[]).await
    }

    async fn with_hosts(
        env: &Arc<TestEnv>,
        prefix: &str,
        n: usize,
        rollout: Option<Value>,
        host_args: &[&str],
    ) -> anyhow::Result<Self> {
        let client = env.client();
        install_cache_crd(&client).await?;
        let ns = env.create_namespace(prefix).await?;
        for (cm, flavor) in [
            ("cache-module", "cache-operator"),
            ("cache-module-v2", "cache-operator-v2"),
            ("cache-module-broken", "cache-operator-broken"),
        ] {
            put_module(&client, &ns, cm, "module.wasm", &module(flavor)?).await?;
        }
        let user = format!("wasmop-{ns}");
        let (_, kubeconfig) = admin_identity(env, &user).await?;
        let mut case = Self {
            env: env.clone(),
            client,
            ns,
            user,
            kubeconfig,
            hosts: Vec::new(),
            names: (0..n).map(|i| format!("cache-{i}")).collect(),
        };
        case.list("cache-module", rollout).await?;
        case.start_host(host_args).await?;
        for name in &case.names {
            create_small_cache(&case.client, &case.ns, name).await?;
        }
        case.all_ready().await?;
        Ok(case)
    }

    /// Starts one more host following the list.
    async fn start_host(&mut self, extra: &[&str]) -> anyhow::Result<()> {
        let list = format!("{}/{LIST}", self.ns);
        let mut args = vec!["--guests-configmap", list.as_str()];
        args.extend_from_slice(extra);
        let mut host = HostProcess::start(&self.env, &self.kubeconfig, &self.ns, &args)?;
        host.wait_for_log("wasmop host running", LONG).await?;
        self.hosts.push(host);
        Ok(())
    }

    /// Lists the cache-operator with the module in ConfigMap `cm` and the
    /// entry's `rollout` (YAML under `rollout:`, empty for none).
    async fn list(&self, cm: &str, rollout: Option<Value>) -> anyhow::Result<()> {
        let mut entry = Entry::config_map(GUEST, cm).namespaces([&self.ns]);
        if let Some(rollout) = rollout {
            entry = entry.with("rollout", rollout);
        }
        put_guest_list(&self.client, &self.ns, LIST, &GuestList::of([entry]).yaml()).await
    }

    async fn all_ready(&self) -> anyhow::Result<()> {
        let api = caches(&self.client, &self.ns);
        wait_for(LONG, || async {
            let list = api.list(&ListParams::default()).await?.items;
            let ready = list.iter().filter(|c| support::fleet::is_ready(c)).count();
            if ready == self.names.len() {
                Ok(Some(()))
            } else {
                bail!("{ready} of {} Caches Ready", self.names.len())
            }
        })
        .await
    }

    /// The guest's record in the status ConfigMap, as YAML read into JSON.
    async fn record(&self) -> anyhow::Result<Value> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns);
        let cm = api.get(STATUS).await?;
        let text = cm
            .data
            .and_then(|d| d.get(GUEST).cloned())
            .context("no record of the guest")?;
        Ok(serde_saphyr::from_str(&text)?)
    }

    /// Waits until the record's phase is `phase`; returns the record.
    async fn phase(&self, phase: &str, timeout: Duration) -> anyhow::Result<Value> {
        wait_for(timeout, || async {
            let record = self.record().await?;
            if record["phase"] == phase {
                Ok(Some(record))
            } else {
                bail!("the record is {record}")
            }
        })
        .await
        .with_context(|| format!("the rollout never reached {phase}"))
    }

    /// The names of the PodDisruptionBudgets in the namespace.
    async fn pdbs(&self) -> anyhow::Result<BTreeSet<String>> {
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &self.ns);
        Ok(api
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect())
    }

    /// Parsed metrics of the host `i`.
    async fn metrics(&mut self, i: usize) -> anyhow::Result<Value> {
        let addr = self.hosts[i].endpoint("metrics").await?;
        let (_, body) = http_get(addr, "/metrics").await?;
        parse_prometheus(&body)
    }

    /// `wasmop <args>` with the case's kubeconfig: exit code and stdout.
    fn wasmop(&self, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<(i32, String)> {
        let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .output()?;
        let stdout = String::from_utf8(out.stdout)?;
        let code = out.status.code().context("killed by a signal")?;
        ensure!(
            code != 1,
            "wasmop {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok((code, stdout))
    }

    /// The Deployments the host wrote since `since`, by name.
    fn deployments_written_since(&self, since: Timestamp) -> anyhow::Result<BTreeSet<String>> {
        Ok(timed_successful_writes_by(&self.env, &self.user)?
            .into_iter()
            .filter(|(at, (_, resource, _, _))| *at >= since && resource == "deployments")
            .map(|(_, (_, _, _, name))| name)
            .collect())
    }
}

fn module(flavor: &str) -> anyhow::Result<Vec<u8>> {
    Ok(std::fs::read(guest_module(flavor)?)?)
}

async fn a_canary_of_a_broken_build_aborts_in_its_first_step_and_every_cache_returns_to_stable(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut case = Case::new(&env, "abort", 20, Some(canary_watched())).await?;
    let stable = sha256_hex(&module("cache-operator")?);
    let broken = sha256_hex(&module("cache-operator-broken")?);
    let before = case.record().await?;
    ensure!(
        before["phase"] == "Stable" && before["stable"] == stable.as_str(),
        "before the rollout: {before}"
    );
    let started = Timestamp::now();
    case.list("cache-module-broken", Some(canary_watched()))
        .await?;

    let record = case.phase("Aborted", LONG).await?;
    ensure!(
        record["stable"] == stable.as_str() && record["candidate"] == broken.as_str(),
        "{record}"
    );
    ensure!(
        record["step"] == 1,
        "aborted during the first step: {record}"
    );
    let reason = record["reason"].as_str().unwrap_or_default();
    ensure!(
        reason.contains("did not show their ready condition again") && reason.contains("cache-"),
        "the reason names the readiness and one parent: {reason}"
    );
    let note = wait_for_event(&case.client, &case.ns, LIST, "RolloutAborted", LONG).await?;
    ensure!(
        note.contains("aborted at step 1") && note.contains("cache-"),
        "RolloutAborted names the reason and a parent: {note}"
    );

    // Every Cache is back on its stable children.
    let deployments: Api<Deployment> = Api::namespaced(case.client.clone(), &case.ns);
    wait_for(LONG, || async {
        let all = deployments.list(&ListParams::default()).await?.items;
        let scaled = all
            .iter()
            .filter(|d| d.spec.as_ref().and_then(|s| s.replicas) != Some(1))
            .count();
        if all.len() == 20 && scaled == 0 {
            Ok(Some(()))
        } else {
            bail!("{} Deployments, {scaled} not at 1 replica", all.len())
        }
    })
    .await?;
    case.all_ready().await?;
    // The candidate wrote at most 10 % of the Caches' children, rounded up.
    let written = case.deployments_written_since(started)?;
    ensure!(
        written.len() <= 2,
        "the broken build reached more than 2 of 20 Caches: {written:?}"
    );
    ensure!(!written.is_empty(), "the broken build never ran");

    let metrics = case.metrics(0).await?;
    let phase = |p: &str| {
        sample(
            &metrics,
            "wasmop_rollout_phase",
            "wasmop_rollout_phase",
            &[("guest", GUEST), ("phase", p)],
        )
    };
    ensure!(
        phase("Aborted") == Some(1.0) && phase("Progressing") == Some(0.0),
        "wasmop_rollout_phase: Aborted {:?}, Progressing {:?}",
        phase("Aborted"),
        phase("Progressing")
    );
    let (code, table) = case.wasmop(
        &case.kubeconfig,
        &[
            "status",
            "--guests-configmap",
            &format!("{}/{LIST}", case.ns),
        ],
    )?;
    ensure!(code == 0, "wasmop status exited {code}");
    let row = table
        .lines()
        .find(|l| l.starts_with(GUEST))
        .context("no row for the guest")?;
    ensure!(
        row.contains("Aborted") && row.contains(&stable[..12]) && row.contains(&broken[..12]),
        "wasmop status: {table}"
    );

    // The rolled-back module is not tried again while the entry names it.
    let quiet_from = Timestamp::now();
    let list: Api<ConfigMap> = Api::namespaced(case.client.clone(), &case.ns);
    list.patch(
        LIST,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"touched": "yes"}}})),
    )
    .await?;
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let record = case.record().await?;
        ensure!(record["phase"] == "Aborted", "tried again: {record}");
        let written = case.deployments_written_since(quiet_from)?;
        ensure!(written.is_empty(), "Deployments written again: {written:?}");
    }
    Ok(())
}

async fn v2_in_shadow_applies_nothing_and_names_the_pdb_then_a_canary_promotes_it(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut case = Case::new(&env, "shadow", 10, Some(shadow())).await?;
    let v2 = sha256_hex(&module("cache-operator-v2")?);
    case.list("cache-module-v2", Some(shadow())).await?;
    case.phase("Shadowing", LONG).await?;
    // Every Cache is reconciled again with the candidate beside it.
    let mut different = 0.0;
    for _ in 0..300 {
        let metrics = case.metrics(0).await?;
        different = sample(
            &metrics,
            "wasmop_guest_shadow_reconciles",
            "wasmop_guest_shadow_reconciles_total",
            &[("guest", GUEST), ("result", "different")],
        )
        .unwrap_or(0.0);
        if different >= 10.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ensure!(different >= 10.0, "{different} shadow reconciles differed");
    for name in &case.names {
        let note = wait_for_event(&case.client, &case.ns, name, "ShadowDifferent", LONG).await?;
        ensure!(
            note.contains("PodDisruptionBudget"),
            "ShadowDifferent of {name} names the PDB: {note}"
        );
        let events = events_about(&case.client, &case.ns, name).await?;
        let count = events
            .iter()
            .filter(|(_, r, _)| r == "ShadowDifferent")
            .count();
        ensure!(count == 1, "{name} has {count} ShadowDifferent Events");
    }
    ensure!(case.pdbs().await?.is_empty(), "shadow applied a PDB");
    let deployments: Api<Deployment> = Api::namespaced(case.client.clone(), &case.ns);
    let labelled = deployments
        .list(&ListParams::default().labels("apps.example.com/version=v2"))
        .await?
        .items
        .len();
    ensure!(labelled == 0, "shadow applied v2 to {labelled} Deployments");

    case.list("cache-module-v2", Some(canary_quick())).await?;
    let record = case.phase("Promoted", LONG).await?;
    ensure!(
        record["stable"] == v2.as_str() && record.get("candidate").is_none(),
        "{record}"
    );
    wait_for_event(&case.client, &case.ns, LIST, "RolloutPromoted", LONG).await?;
    wait_for(LONG, || async {
        let pdbs = case.pdbs().await?;
        if pdbs.len() == 10 {
            Ok(Some(()))
        } else {
            bail!("{} of 10 PDBs", pdbs.len())
        }
    })
    .await?;
    case.all_ready().await?;
    Ok(())
}

async fn wasmop_plan_lists_each_pdb_of_v2_nothing_for_v1_and_the_cache_a_broken_build_fails_on(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let case = Case::new(&env, "plan", 20, None).await?;
    // The broken build fails on this Cache; v1 does not care.
    caches(&case.client, &case.ns)
        .patch(
            "cache-7",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"apps.example.com/break": "yes"}}})),
        )
        .await?;
    let planner = format!("planner-{}", case.ns);
    let (_, kubeconfig) = admin_identity(&env, &planner).await?;
    let list = format!("{}/{LIST}", case.ns);
    let plan = |flavor: &str, extra: &[&str]| -> anyhow::Result<(i32, String)> {
        let guest = format!("{GUEST}={}", guest_module(flavor)?.display());
        let mut args = vec![
            "plan",
            "--guest",
            &guest,
            "--namespace",
            &case.ns,
            "--guests-configmap",
            &list,
        ];
        args.extend_from_slice(extra);
        case.wasmop(&kubeconfig, &args)
    };

    let (code, out) = plan("cache-operator-v2", &[])?;
    ensure!(code == 2, "a plan with changes exits 2, not {code}:\n{out}");
    let creations = out
        .lines()
        .filter(|l| l.starts_with("  + create PodDisruptionBudget cache-"))
        .count();
    ensure!(creations == 20, "{creations} PDB creations in:\n{out}");
    ensure!(
        out.lines().last() == Some("plan: 20 parents: 0 unchanged, 20 would change, 0 would fail"),
        "{out}"
    );

    let (code, out) = plan("cache-operator", &[])?;
    ensure!(
        code == 0,
        "a plan of the running version exits 0, not {code}:\n{out}"
    );
    ensure!(
        out.trim() == "plan: 20 parents: 20 unchanged, 0 would change, 0 would fail",
        "{out}"
    );

    let (code, out) = plan("cache-operator-broken", &["-o", "json"])?;
    ensure!(code == 2, "exit {code}");
    let json: Value = serde_json::from_str(&out)?;
    ensure!(
        json["summary"] == json!({"parents": 20, "unchanged": 0, "change": 19, "fail": 1}),
        "{}",
        json["summary"]
    );
    let failed: Vec<&Value> = json["parents"]
        .as_array()
        .context("parents")?
        .iter()
        .filter(|p| p["result"] == "fail")
        .collect();
    ensure!(
        failed.len() == 1
            && failed[0]["name"] == "cache-7"
            && failed[0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("apps.example.com/break")),
        "{failed:?}"
    );
    let replicas = json["parents"][0]["change"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["kind"] == "Deployment"))
        .context("no Deployment change")?;
    ensure!(
        replicas["fields"].as_array().is_some_and(|f| f
            .iter()
            .any(|c| c["path"] == "/spec/replicas" && c["after"] == 0)),
        "the dry run shows the replicas going to 0: {replicas}"
    );

    // Nothing was written: the only requests with a write verb are dry runs.
    let writes: Vec<String> = env
        .audit_events_of(&planner)?
        .into_iter()
        .filter(|e| e["user"]["username"] == planner.as_str())
        .filter(|e| {
            e["verb"]
                .as_str()
                .is_some_and(|v| wasmop_testenv::WRITE_VERBS.contains(&v))
        })
        .filter_map(|e| e["requestURI"].as_str().map(str::to_owned))
        .filter(|uri| !uri.contains("dryRun=All"))
        .collect();
    ensure!(writes.is_empty(), "wasmop plan wrote: {writes:?}");
    Ok(())
}

async fn a_host_killed_mid_canary_is_resumed_at_the_same_step_by_the_standby_and_by_the_restarted_host(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let step = canary("20s", "120s");
    let mut case = Case::with_hosts(&env, "resume", 20, Some(step.clone()), LEASE).await?;
    case.hosts[0]
        .wait_for_log("became the leader", LONG)
        .await?;
    case.start_host(LEASE).await?;
    let started = Timestamp::now();
    case.list("cache-module-v2", Some(step)).await?;
    let first = wait_for(LONG, || async {
        let pdbs = case.pdbs().await?;
        let record = case.record().await?;
        if pdbs.len() == 2 && record["step"] == 1 && record["parentsOnCandidate"] == 2 {
            Ok(Some(pdbs))
        } else {
            bail!("{} PDBs; record {record}", pdbs.len())
        }
    })
    .await
    .context("step 1 never showed")?;

    // The leader dies mid-step; the standby takes over at the same step.
    case.hosts[0].stop();
    case.hosts[1]
        .wait_for_log("became the leader", LONG)
        .await?;
    let record = case.record().await?;
    ensure!(record["step"] == 1, "after the takeover: {record}");
    // Parents only join the candidate: the first two keep their PDB.
    let second = wait_for(LONG, || async {
        let pdbs = case.pdbs().await?;
        ensure!(
            pdbs.is_superset(&first),
            "a parent left the candidate: {pdbs:?}"
        );
        let record = case.record().await?;
        if pdbs.len() == 10 && record["step"] == 2 {
            Ok(Some(pdbs))
        } else {
            bail!("{} PDBs; record {record}", pdbs.len())
        }
    })
    .await
    .context("step 2 never showed")?;

    // The first host comes back as a standby; the second dies: the
    // restarted one resumes at step 2 and promotes.
    case.start_host(LEASE).await?;
    case.hosts[1].stop();
    case.hosts[2]
        .wait_for_log("became the leader", LONG)
        .await?;
    ensure!(
        case.record().await?["step"] == 2,
        "after the second takeover"
    );
    wait_for(LONG, || async {
        let pdbs = case.pdbs().await?;
        ensure!(
            pdbs.is_superset(&second),
            "a parent left the candidate: {pdbs:?}"
        );
        let record = case.record().await?;
        if pdbs.len() == 20 && record["phase"] == "Promoted" {
            Ok(Some(()))
        } else {
            bail!("{} PDBs; record {record}", pdbs.len())
        }
    })
    .await
    .context("never promoted")?;
    case.all_ready().await?;
    let deleted: Vec<String> = timed_successful_writes_by(&env, &case.user)?
        .into_iter()
        .filter(|(at, (verb, resource, _, _))| {
            *at >= started && verb == "delete" && resource == "poddisruptionbudgets"
        })
        .map(|(_, (_, _, _, name))| name)
        .collect();
    ensure!(deleted.is_empty(), "PDBs deleted: {deleted:?}");
    Ok(())
}

/// The hostile guest listed again with the setting `attack`: a candidate
/// that misbehaves on every reconcile where its stable version does not.
fn hostile_list(ns: &str, settings: Option<Value>, rollout: Value) -> String {
    let mut entry = Entry::hostile(ns)
        .with("timeout", "300ms")
        .with("rollout", rollout);
    if let Some(settings) = settings {
        entry = entry.with("settings", settings);
    }
    GuestList::of([entry]).yaml()
}

async fn a_hostile_candidate_is_contained_by_shadow_and_rolled_back_by_a_canary(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    support::install_yaml(
        &client,
        &support::workspace().join("guests/hostile/crd.yaml"),
    )
    .await?;
    let ns = env.create_namespace("hostile-rollout").await?;
    put_module(
        &client,
        &ns,
        "hostile-module",
        "module.wasm",
        &module("hostile")?,
    )
    .await?;
    put_guest_list(&client, &ns, LIST, &hostile_list(&ns, None, shadow())).await?;
    let user = format!("wasmop-{ns}");
    let (_, kubeconfig) = admin_identity(&env, &user).await?;
    let list_ref = format!("{ns}/{LIST}");
    let mut host = HostProcess::start(&env, &kubeconfig, &ns, &["--guests-configmap", &list_ref])?;
    host.wait_for_log("started guest", LONG).await?;
    let hostiles = support::hostiles(&client, &ns);
    let parent: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
        "metadata": {"name": "h1"}, "spec": {"attack": "none"},
    }))?;
    hostiles
        .create(&kube::api::PostParams::default(), &parent)
        .await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let child = || async { Ok(configmaps.get_opt("h1-ok").await?.map(|_| ())) };
    wait_for(LONG, child)
        .await
        .context("the stable version's child")?;
    let record = |phase: &'static str| {
        let client = client.clone();
        let ns = ns.clone();
        async move {
            let cm = Api::<ConfigMap>::namespaced(client, &ns)
                .get(STATUS)
                .await?;
            let text = cm
                .data
                .and_then(|d| d.get("hostile").cloned())
                .context("no record")?;
            let record: Value = serde_saphyr::from_str(&text)?;
            if record["phase"] == phase {
                Ok(Some(record))
            } else {
                bail!("the record is {record}")
            }
        }
    };

    // Shadow: the candidate spins to its deadline on every reconcile; the
    // stable version's answers still apply.
    put_guest_list(
        &client,
        &ns,
        LIST,
        &hostile_list(&ns, Some(json!({"attack": "loop"})), shadow()),
    )
    .await?;
    wait_for(LONG, || record("Shadowing")).await?;
    let addr = host.endpoint("metrics").await?;
    wait_for(LONG, || async {
        let (_, body) = http_get(addr, "/metrics").await?;
        let failed = sample(
            &parse_prometheus(&body)?,
            "wasmop_guest_shadow_reconciles",
            "wasmop_guest_shadow_reconciles_total",
            &[("guest", "hostile"), ("result", "failed")],
        );
        Ok((failed >= Some(1.0)).then_some(()))
    })
    .await
    .context("the spinning candidate was not counted failed")?;
    configmaps.delete("h1-ok", &Default::default()).await?;
    wait_for(LONG, child)
        .await
        .context("the stable version did not restore its child beside a spinning shadow")?;

    // Canary: the first reconcile the candidate fails (a trap) rolls back.
    put_guest_list(
        &client,
        &ns,
        LIST,
        &hostile_list(
            &ns,
            Some(json!({"attack": "panic"})),
            json!({
                "strategy": "Canary",
                "steps": [100],
                "stepDuration": "10m",
                "readyCondition": "",
            }),
        ),
    )
    .await?;
    let aborted = wait_for(LONG, || record("Aborted")).await?;
    let reason = aborted["reason"].as_str().unwrap_or_default();
    ensure!(
        reason.contains("GuestTrap") && reason.contains("h1"),
        "{reason}"
    );
    configmaps.delete("h1-ok", &Default::default()).await?;
    wait_for(LONG, child)
        .await
        .context("the stable version did not serve h1 again after the rollback")?;

    // A candidate of another primary kind is refused; the stable version
    // keeps serving.
    put_guest_list(
        &client,
        &ns,
        LIST,
        &hostile_list(&ns, Some(json!({"primary": "HostileTwin"})), canary_quick()),
    )
    .await?;
    let note = wait_for_event(&client, &ns, LIST, "RolloutKindsChanged", LONG).await?;
    ensure!(
        note.contains("primary kind") && note.contains("Immediate"),
        "{note}"
    );
    configmaps.delete("h1-ok", &Default::default()).await?;
    wait_for(LONG, child)
        .await
        .context("the stable version stopped serving")?;
    Ok(())
}

async fn a_progressive_change_of_the_module_in_place_is_refused_and_the_stable_version_keeps_serving(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let case = Case::new(&env, "inplace", 2, Some(canary_quick())).await?;
    // The module ConfigMap the stable version came from, changed in place.
    put_module(
        &case.client,
        &case.ns,
        "cache-module",
        "module.wasm",
        &module("cache-operator-v2")?,
    )
    .await?;
    let note = wait_for_event(
        &case.client,
        &case.ns,
        LIST,
        "RolloutStableUnavailable",
        LONG,
    )
    .await?;
    ensure!(
        note.contains("stable version's own source") && note.contains("Immediate"),
        "{note}"
    );
    let record = case.record().await?;
    ensure!(
        record["phase"] == "Stable" && record.get("candidate").is_none(),
        "{record}"
    );
    ensure!(case.pdbs().await?.is_empty(), "v2 reached a Cache");
    Ok(())
}

/// The tests of this module.
pub fn tests() -> Vec<Test> {
    wasmop_testenv::tests![
        a_canary_of_a_broken_build_aborts_in_its_first_step_and_every_cache_returns_to_stable => 300,
        v2_in_shadow_applies_nothing_and_names_the_pdb_then_a_canary_promotes_it => 300,
        wasmop_plan_lists_each_pdb_of_v2_nothing_for_v1_and_the_cache_a_broken_build_fails_on => 300,
        a_host_killed_mid_canary_is_resumed_at_the_same_step_by_the_standby_and_by_the_restarted_host => 400,
        a_hostile_candidate_is_contained_by_shadow_and_rolled_back_by_a_canary => 300,
        a_progressive_change_of_the_module_in_place_is_refused_and_the_stable_version_keeps_serving,
    ]
}
