//! End to end on the real control plane: a guest whose parents are split
//! into shards (the guest-list entry's `shards`, the `wasmop.dev/shard`
//! label) (issue: every replica works: guests and shards spread over the
//! replicas).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use support::guests::{Entry, GuestList};
use support::{
    HostProcess, caches, guest_module, install_cache_crd, put_guest_list, put_module, wait_for,
};
use wasmop_host::controller::shards::{SHARD_LABEL, Shard};
use wasmop_testenv::TestEnv;
use wasmop_testenv::harness::run;

const LONG: Duration = Duration::from_secs(120);
const LIST: &str = "wasmop-guests";
const CACHES: usize = 12;

fn list(ns: &str, shards: u16) -> String {
    GuestList::of([Entry::cache_operator(ns).with("shards", shards)]).yaml()
}

/// The shard label of every object `objects` lists, by name.
fn shard_labels<K: Resource>(objects: &[K]) -> BTreeMap<String, Option<String>> {
    objects
        .iter()
        .map(|o| (o.name_any(), o.labels().get(SHARD_LABEL).cloned()))
        .collect()
}

/// Waits until every Cache, and the Deployment and ConfigMap of each, carry
/// the shard of the Cache among `count`.
async fn wait_labelled(client: &Client, ns: &str, count: u16) -> anyhow::Result<()> {
    let want = |cache: &str| Some(Shard::of(Some(ns), cache, count).to_string());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    wait_for(LONG, || async {
        let parents = shard_labels(&caches(client, ns).list(&ListParams::default()).await?.items);
        let children = ListParams::default().labels("wasmop.dev/guest=cache-operator");
        let deployments = shard_labels(&deployments.list(&children).await?.items);
        let configmaps = shard_labels(&configmaps.list(&children).await?.items);
        ensure!(parents.len() == CACHES, "{} Caches", parents.len());
        for (cache, label) in &parents {
            ensure!(*label == want(cache), "Cache {cache} is labelled {label:?}");
            for (kind, children, child) in [
                ("Deployment", &deployments, cache.clone()),
                ("ConfigMap", &configmaps, format!("{cache}-config")),
            ] {
                let label = children.get(&child);
                ensure!(
                    label == Some(&want(cache)),
                    "the {kind} {child} is labelled {label:?}"
                );
            }
        }
        Ok(Some(()))
    })
    .await
    .with_context(|| format!("not every Cache and child carries its shard of {count}"))
}

/// Sets `config.round` of every Cache and waits until each one's ConfigMap
/// shows it: every parent is reconciled where it now is.
async fn every_cache_reconciles(client: &Client, ns: &str, round: &str) -> anyhow::Result<()> {
    let api = caches(client, ns);
    for i in 0..CACHES {
        let patch = json!({"spec": {"config": {"round": round}}});
        api.patch(
            &format!("c{i}"),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    wait_for(LONG, || async {
        let behind: Vec<String> = configmaps
            .list(&ListParams::default().labels("wasmop.dev/guest=cache-operator"))
            .await?
            .items
            .into_iter()
            .filter(|cm| {
                cm.data
                    .as_ref()
                    .and_then(|d| d.get("round"))
                    .map(String::as_str)
                    != Some(round)
            })
            .map(|cm| cm.name_any())
            .collect();
        if behind.is_empty() {
            Ok(Some(()))
        } else {
            bail!("not reconciled to round {round}: {behind:?}")
        }
    })
    .await
}

/// Waits until the host's metrics show each of `count` shards held and
/// `CACHES` Caches cached.
async fn wait_metrics(host: &mut HostProcess, count: u16) -> anyhow::Result<()> {
    let addr = host.endpoint("metrics").await?;
    wait_for(LONG, || async {
        let (_, text) = support::http_get(addr, "/metrics").await?;
        let metrics = support::parse_prometheus(&text)?;
        for shard in 0..count {
            let held = support::sample(
                &metrics,
                "wasmop_shard_held",
                "wasmop_shard_held",
                &[("guest", "cache-operator"), ("shard", &shard.to_string())],
            );
            ensure!(held == Some(1.0), "shard {shard} held: {held:?}");
        }
        let cached = support::sample(
            &metrics,
            "wasmop_cached_objects",
            "wasmop_cached_objects",
            &[("guest", "cache-operator"), ("kind", "Cache")],
        );
        ensure!(cached == Some(CACHES as f64), "Caches cached: {cached:?}");
        Ok(Some(()))
    })
    .await
}

async fn parents_and_children_carry_their_shard_and_move_when_the_count_changes(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env.create_namespace("shards").await?;
    let module = std::fs::read(guest_module("cache-operator")?)?;
    put_module(&client, &ns, "cache-module", "module.wasm", &module).await?;
    put_guest_list(&client, &ns, LIST, &list(&ns, 3)).await?;
    let user = format!("wasmop-{ns}");
    let (_, kubeconfig) = support::admin_identity(&env, &user).await?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &[
            "--guests-configmap",
            &format!("{ns}/{LIST}"),
            "--metrics-bind-address",
            "127.0.0.1:0",
        ],
    )?;
    host.wait_for_log("started guest", LONG).await?;
    for i in 0..CACHES {
        support::create_cache(
            &client,
            &ns,
            &format!("c{i}"),
            json!({"image": "redis:7.2", "replicas": 1, "config": {"round": "0"}}),
        )
        .await?;
    }
    for i in 0..CACHES {
        support::wait_ready(&client, &ns, &format!("c{i}")).await?;
    }
    wait_labelled(&client, &ns, 3).await?;
    wait_metrics(&mut host, 3).await?;

    // A new parent's label is one write: each Cache was patched twice, for
    // its finalizer and for its shard.
    support::writes_settle(&env, &user).await?;
    let mut patches: BTreeMap<String, usize> = BTreeMap::new();
    for (verb, resource, subresource, name) in support::successful_writes_by(&env, &user)? {
        if verb == "patch" && resource == "caches" && subresource.is_empty() {
            *patches.entry(name).or_default() += 1;
        }
    }
    ensure!(
        patches.len() == CACHES && patches.values().all(|n| *n == 2),
        "patches of each Cache: {patches:?}"
    );

    // A label a user removes comes back.
    let api = caches(&client, &ns);
    let unlabel = json!({"metadata": {"labels": {SHARD_LABEL: null}}});
    api.patch("c0", &PatchParams::default(), &Patch::Merge(&unlabel))
        .await?;
    wait_labelled(&client, &ns, 3).await?;

    // 3 shards become 5: every parent and child is relabelled, and every
    // parent is reconciled in its new shard.
    put_guest_list(&client, &ns, LIST, &list(&ns, 5)).await?;
    wait_labelled(&client, &ns, 5).await?;
    every_cache_reconciles(&client, &ns, "1").await?;
    wait_metrics(&mut host, 5).await?;
    let log = host.log();
    ensure!(
        !log.contains("reconcile failed"),
        "a reconcile failed while the shards moved:\n{}",
        support::tail(&log, 40)
    );
    Ok(())
}

async fn a_shard_count_out_of_range_is_refused_and_the_running_version_kept(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env.create_namespace("shards-bad").await?;
    let module = std::fs::read(guest_module("cache-operator")?)?;
    put_module(&client, &ns, "cache-module", "module.wasm", &module).await?;
    put_guest_list(&client, &ns, LIST, &list(&ns, 2)).await?;
    let mut host = HostProcess::follow_list(&env, &ns, LIST).await?;
    host.wait_for_log("started guest", LONG).await?;
    put_guest_list(&client, &ns, LIST, &list(&ns, 0)).await?;
    host.wait_for_log("shards must be between 1 and 64, got 0", LONG)
        .await?;
    support::create_small_cache(&client, &ns, "after").await?;
    let ready = support::wait_ready(&client, &ns, "after").await?;
    let want = Shard::of(Some(&ns), "after", 2).to_string();
    ensure!(
        ready.labels().get(SHARD_LABEL) == Some(&want),
        "the running two shards keep serving: {:?}",
        ready.labels()
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    run(wasmop_testenv::tests![
        parents_and_children_carry_their_shard_and_move_when_the_count_changes => Duration::from_secs(300),
        a_shard_count_out_of_range_is_refused_and_the_running_version_kept,
    ])
}
