//! End to end on the real control plane: the bounds the host promises hold
//! under a hostile candidate, a hostile plan and a greedy neighbour (each
//! class of issue #49 by the hostile guest's own attacks): a canary that
//! breaks readiness after one failure is rolled back; a candidate whose new
//! kind the guest may not watch is refused and never delays the stable
//! version; the shadow queue holds its answers bounded in bytes; a plan is
//! bounded and made as the guest; one guest's concurrency never exhausts
//! what the others share; the namespace fence is the API server's too; a
//! describe refusal of 2 MiB is cut in the log.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmop_testenv::TestEnv;
use wasmop_testenv::harness::Test;

use crate::support;
use crate::support::guests::{Entry, GuestList};
use crate::support::{
    HostProcess, admin_identity, events_about, guest_module, hostiles, put_guest_list,
    put_hostile_module, wait_for, wait_for_event,
};

const LONG: Duration = Duration::from_secs(120);
const LIST: &str = "wasmop-guests";
const STATUS: &str = "wasmop-guests-status";

/// A namespace with the hostile guest's CRD and module, and its name.
async fn hostile_namespace(env: &TestEnv, prefix: &str) -> anyhow::Result<String> {
    let client = env.client();
    support::install_yaml(
        &client,
        &support::workspace().join("guests/hostile/crd.yaml"),
    )
    .await?;
    let ns = env.create_namespace(prefix).await?;
    put_hostile_module(&client, &ns).await?;
    Ok(ns)
}

/// Creates the Hostile `name` in `ns` making `attack`.
async fn hostile(client: &kube::Client, ns: &str, name: &str, attack: &str) -> anyhow::Result<()> {
    let parent: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
        "metadata": {"name": name}, "spec": {"attack": attack},
    }))?;
    hostiles(client, ns)
        .create(&PostParams::default(), &parent)
        .await?;
    Ok(())
}

/// Waits until the ConfigMap `name` exists in `ns`.
async fn config_map_appears(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    wait_for(LONG, || async { Ok(api.get_opt(name).await?.map(|_| ())) })
        .await
        .with_context(|| format!("ConfigMap {name} did not appear"))
}

/// The rollout record of guest `guest` once its phase is `phase`.
async fn record(
    client: &kube::Client,
    ns: &str,
    guest: &str,
    phase: &str,
) -> anyhow::Result<Value> {
    wait_for(LONG, || async {
        let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get_opt(STATUS)
            .await?
            .context("no status ConfigMap")?;
        let text = cm
            .data
            .and_then(|d| d.get(guest).cloned())
            .context("no record")?;
        let record: Value = serde_saphyr::from_str(&text)?;
        if record["phase"] == phase {
            Ok(Some(record))
        } else {
            bail!("the record is {record}")
        }
    })
    .await
}

async fn a_canary_that_breaks_readiness_after_one_failure_is_rolled_back(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    let ns = hostile_namespace(&env, "bounds-canary").await?;
    let canary = json!({
        "strategy": "Canary",
        "steps": [100],
        "stepDuration": "10m",
        "maxFailedReconciles": 3,
        "readyCondition": "Ready",
        "progressDeadline": "5s",
    });
    let list = |settings: Option<Value>| {
        let mut entry = Entry::hostile(&ns).with("rollout", canary.clone());
        if let Some(settings) = settings {
            entry = entry.with("settings", settings);
        }
        GuestList::of([entry]).yaml()
    };
    put_guest_list(&client, &ns, LIST, &list(None)).await?;
    let _host = HostProcess::follow_list(&env, &ns, LIST).await?;
    hostile(&client, &ns, "h1", "ready").await?;
    config_map_appears(&client, &ns, "h1-ok").await?;
    wait_for(LONG, || async {
        let h1 = hostiles(&client, &ns).get("h1").await?;
        let ready = h1.data.pointer("/status/conditions/0/status") == Some(&json!("True"));
        Ok(ready.then_some(()))
    })
    .await
    .context("the stable version's Ready")?;

    // The candidate fails its first reconcile of h1 (one failure, fewer
    // than the three allowed), then answers Ready False for good.
    put_guest_list(
        &client,
        &ns,
        LIST,
        &list(Some(json!({"attack": "fail-once-then-unready"}))),
    )
    .await?;
    let aborted = record(&client, &ns, "hostile", "Aborted").await?;
    let reason = aborted["reason"].as_str().unwrap_or_default();
    ensure!(
        reason.contains("were ready") && reason.contains("h1"),
        "{reason}"
    );
    Ok(())
}

async fn a_candidate_whose_new_kind_the_guest_may_not_watch_is_refused_and_never_delays_the_stable_version(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    let ns = hostile_namespace(&env, "bounds-kinds").await?;
    // The guest's identity may do what its running version describes, and
    // nothing about Jobs.
    let (_, kubeconfig) = support::least_privilege_with(
        &env,
        &format!("kinds-{ns}"),
        &ns,
        &["hostile"],
        &["--guest-identity", "impersonate"],
    )
    .await?;
    let list = |settings: Option<Value>| {
        let mut entry = Entry::hostile(&ns).with("rollout", json!({"strategy": "Shadow"}));
        if let Some(settings) = settings {
            entry = entry.with("settings", settings);
        }
        GuestList::of([entry]).yaml()
    };
    put_guest_list(&client, &ns, LIST, &list(None)).await?;
    let list_ref = format!("{ns}/{LIST}");
    let _host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &[
            "--guests-configmap",
            &list_ref,
            "--guest-identity",
            "impersonate",
        ],
    )?;
    hostile(&client, &ns, "h1", "none").await?;
    config_map_appears(&client, &ns, "h1-ok").await?;

    // A candidate that adds Jobs as children.
    put_guest_list(
        &client,
        &ns,
        LIST,
        &list(Some(json!({"describe": "extra-kind"}))),
    )
    .await?;
    let note = wait_for_event(&client, &ns, LIST, "Forbidden", LONG).await?;
    ensure!(
        note.contains("jobs.batch") && note.contains("cannot be watched"),
        "{note}"
    );
    // The stable version reconciles a new parent at once.
    hostile(&client, &ns, "h2", "none").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    wait_for(Duration::from_secs(20), || async {
        Ok(api.get_opt("h2-ok").await?.map(|_| ()))
    })
    .await
    .context("the stable version did not reconcile h2 beside the refused candidate")?;
    Ok(())
}

async fn the_shadow_queue_keeps_what_it_holds_of_large_answers_bounded(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    let ns = hostile_namespace(&env, "bounds-shadow").await?;
    let list = |settings: Option<Value>| {
        let mut entry = Entry::hostile(&ns)
            .with("timeout", "2s")
            .with("rollout", json!({"strategy": "Shadow"}));
        if let Some(settings) = settings {
            entry = entry.with("settings", settings);
        }
        GuestList::of([entry]).yaml()
    };
    put_guest_list(&client, &ns, LIST, &list(None)).await?;
    let host = HostProcess::follow_list(&env, &ns, LIST).await?;
    hostile(&client, &ns, "warm", "none").await?;
    config_map_appears(&client, &ns, "warm-ok").await?;
    // A slow candidate beside a stable version whose every answer is
    // 4 MB and whose every reconcile fails and comes back (the API server
    // refuses its children): answers pile up faster than the candidate
    // takes them.
    put_guest_list(
        &client,
        &ns,
        LIST,
        &list(Some(json!({"attack": "refused-bulk-slow"}))),
    )
    .await?;
    record(&client, &ns, "hostile", "Shadowing").await?;
    let before = wasmop_testenv::cost(host.pid());
    for i in 0..30 {
        hostile(&client, &ns, &format!("big-{i}"), "refused-bulk").await?;
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    let after = wasmop_testenv::cost(host.pid());
    ensure!(after.rss_kib > 0, "the host is gone");
    let peak_mib = after.peak_kib / 1024;
    eprintln!(
        "host RSS: {} MiB before the burst, peak {peak_mib} MiB",
        before.rss_kib / 1024
    );
    // The queue holds at most 64 MiB of requests and answers; the stable
    // reconciles, at most 10 at once, hold their own answers.
    ensure!(
        peak_mib <= 640,
        "the host grew to {peak_mib} MiB: the shadow queue holds the answers unbounded"
    );
    Ok(())
}

async fn a_guest_whose_concurrency_would_take_the_whole_pool_gets_its_share_and_the_other_keeps_working(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    let ns = hostile_namespace(&env, "bounds-pool").await?;
    let greedy = Entry::hostile(&ns)
        .with("concurrency", 100)
        .with("timeout", "5s");
    let twin = Entry::config_map("twin", "hostile-module")
        .namespaces([&ns])
        .with("settings", json!({"primary": "HostileTwin"}));
    put_guest_list(&client, &ns, LIST, &GuestList::of([greedy, twin]).yaml()).await?;
    let (_, kubeconfig) = admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let list_ref = format!("{ns}/{LIST}");
    let _host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &["--guests-configmap", &list_ref, "--instance-pool", "64"],
    )?;
    let note = wait_for_event(&client, &ns, LIST, "GuestPoolShare", LONG).await?;
    ensure!(
        note.contains("\"hostile\"") && note.contains("not the 100"),
        "{note}"
    );
    // Every call of the greedy guest waits its whole deadline.
    for i in 0..70 {
        hostile(&client, &ns, &format!("sleeper-{i}"), "sleep").await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let twins = support::dyn_api(
        &client,
        "test.wasmop.dev",
        "v1alpha1",
        "HostileTwin",
        "hostiletwins",
        &ns,
    );
    let parent: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "HostileTwin",
        "metadata": {"name": "t1"}, "spec": {"attack": "none"},
    }))?;
    twins.create(&PostParams::default(), &parent).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    wait_for(Duration::from_secs(20), || async {
        Ok(api.get_opt("t1-ok").await?.map(|_| ()))
    })
    .await
    .context("the other guest's parent was not reconciled beside the greedy guest")?;
    let refused = events_about(&client, &ns, "t1")
        .await?
        .into_iter()
        .filter(|(_, reason, _)| reason == "GuestPoolExhausted")
        .count();
    ensure!(
        refused == 0,
        "{refused} of t1's reconciles found the pool exhausted"
    );
    Ok(())
}

async fn a_guest_confined_to_a_namespace_is_kept_there_by_the_api_server(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let ns = hostile_namespace(&env, "bounds-fence").await?;
    let other = env.create_namespace("bounds-fence-other").await?;
    support::least_privilege_with(
        &env,
        &format!("fence-{ns}"),
        &ns,
        &["hostile"],
        &[
            "--guest-identity",
            "impersonate",
            "--namespaces",
            &format!("hostile={ns}"),
        ],
    )
    .await?;
    // The guest's identity, as the host impersonates it.
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(env.kubeconfig_path())?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:wasmop-guest-hostile"));
    let guest = kube::Client::try_from(config)?;
    let may = |namespace: String| {
        let reviews: Api<SelfSubjectAccessReview> = Api::all(guest.clone());
        async move {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        resource: Some("configmaps".into()),
                        verb: Some("create".into()),
                        namespace: Some(namespace),
                        ..ResourceAttributes::default()
                    }),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            let answer = reviews.create(&PostParams::default(), &review).await?;
            anyhow::Ok(answer.status.is_some_and(|s| s.allowed))
        }
    };
    ensure!(
        may(ns.clone()).await?,
        "the guest may not write in its namespace"
    );
    ensure!(
        !may(other.clone()).await?,
        "the API server lets the guest write in {other}, outside its namespaces"
    );
    Ok(())
}

async fn a_plan_is_bounded_and_made_as_the_guest_would_write(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    let ns = hostile_namespace(&env, "bounds-plan").await?;
    support::least_privilege_with(
        &env,
        &format!("plan-{ns}"),
        &ns,
        &["hostile"],
        &["--guest-identity", "impersonate"],
    )
    .await?;
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([Entry::hostile(&ns)]).yaml(),
    )
    .await?;
    for i in 0..4 {
        hostile(&client, &ns, &format!("wide-{i}"), "wide-status").await?;
    }
    let plan = |extra: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"));
        command
            .args(["plan", "--kubeconfig"])
            .arg(env.kubeconfig_path())
            .arg("--guest")
            .arg(format!(
                "hostile={}",
                guest_module("hostile").unwrap().display()
            ))
            .args(["--guests-configmap", &format!("{ns}/{LIST}")])
            .args(extra);
        command.output()
    };
    // Four parents whose status would get 40,000 fields each.
    let out = plan(&[])?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.code() == Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        text.len() < 1 << 20,
        "the plan printed {} bytes",
        text.len()
    );
    ensure!(
        text.contains("changed fields and Events are left out"),
        "{}",
        support::tail(&text, 5)
    );
    ensure!(
        text.lines().last().unwrap_or_default()
            == "plan: 4 parents: 0 unchanged, 4 would change, 0 would fail",
        "{}",
        support::tail(&text, 3)
    );

    // The guest's own role may not create ConfigMaps: as the guest, the
    // plan says the write would be refused.
    let role = format!("wasmop-plan-{ns}-guest-hostile");
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    let mut cluster_role = roles.get(&role).await?;
    for rule in cluster_role.rules.iter_mut().flatten() {
        if rule.resources.as_deref() == Some(&["configmaps".to_owned()][..]) {
            rule.verbs.retain(|v| v != "create");
        }
    }
    cluster_role.metadata.managed_fields = None;
    roles
        .patch(
            &role,
            &PatchParams::apply("wasmop-tests").force(),
            &Patch::Apply(&cluster_role),
        )
        .await?;
    hostile(&client, &ns, "fresh", "none").await?;
    let out = plan(&["--guest-identity", "impersonate", "--namespace", &ns])?;
    let text = String::from_utf8_lossy(&out.stdout);
    let fresh = text
        .lines()
        .find(|l| l.contains("/fresh:"))
        .with_context(|| format!("no line for fresh in {text}"))?;
    ensure!(
        fresh.contains("would fail")
            && fresh.contains("forbidden")
            && fresh.contains("ConfigMap fresh-ok"),
        "{fresh}"
    );
    // Its requests carry the guest's User-Agent and identity.
    let audit = env.audit_events()?;
    let dry_run = audit
        .iter()
        .find(|e| {
            // A refused create names no object (its name is in the body):
            // the refused dry-run create of a ConfigMap in this namespace.
            e["verb"] == "create"
                && e["objectRef"]["resource"] == "configmaps"
                && e["objectRef"]["namespace"] == ns.as_str()
                && e["responseStatus"]["code"] == 403
                && e["requestURI"]
                    .as_str()
                    .is_some_and(|u| u.contains("dryRun=All"))
        })
        .context("no refused dry-run create of a ConfigMap in the audit log")?;
    ensure!(
        dry_run["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with("wasmop/") && a.ends_with(" guest/hostile")),
        "{dry_run}"
    );
    ensure!(
        dry_run["impersonatedUser"]["username"]
            == format!("system:serviceaccount:{ns}:wasmop-guest-hostile").as_str(),
        "{dry_run}"
    );
    Ok(())
}

async fn a_describe_refusal_of_2_mib_is_cut_in_every_log_line_and_event(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    let ns = hostile_namespace(&env, "bounds-describe").await?;
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([Entry::hostile(&ns).with("settings", json!({"describe": "long-refusal"}))])
            .yaml(),
    )
    .await?;
    let mut host = HostProcess::follow_list(&env, &ns, LIST).await?;
    let note = wait_for_event(&client, &ns, LIST, "InvalidSettings", LONG).await?;
    ensure!(note.len() <= 1024, "an Event note of {} bytes", note.len());
    host.wait_for_log("refused its settings", LONG).await?;
    let log = host.log();
    let longest = log.lines().map(str::len).max().unwrap_or_default();
    ensure!(
        longest <= 6 << 10,
        "a log line of {longest} bytes quotes the refusal whole"
    );
    ensure!(host.is_running(), "the host died");
    Ok(())
}

/// The tests of this module.
pub fn tests() -> Vec<Test> {
    wasmop_testenv::tests![
        a_canary_that_breaks_readiness_after_one_failure_is_rolled_back => 240,
        a_candidate_whose_new_kind_the_guest_may_not_watch_is_refused_and_never_delays_the_stable_version => 240,
        the_shadow_queue_keeps_what_it_holds_of_large_answers_bounded => 240,
        a_guest_whose_concurrency_would_take_the_whole_pool_gets_its_share_and_the_other_keeps_working => 240,
        a_guest_confined_to_a_namespace_is_kept_there_by_the_api_server,
        a_plan_is_bounded_and_made_as_the_guest_would_write => 240,
        a_describe_refusal_of_2_mib_is_cut_in_every_log_line_and_event,
    ]
}
