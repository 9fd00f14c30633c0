//! End to end on the real control plane: the cache-operator guest run by the
//! `wasmop` binary (issue: the WIT contract, the host runtime and the
//! cache-operator guest).

mod support;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use support::{HostProcess, at, caches, guest_module, install_yaml, wait_for, workspace};
use wasmop_testenv::TestEnv;
use wasmop_testenv::harness::run;

const GUEST: &str = "cache-operator";
const LONG: Duration = Duration::from_secs(90);

/// CRD installed, a namespace, and a host watching only that namespace.
async fn setup(env: &TestEnv, prefix: &str) -> anyhow::Result<(Client, String, HostProcess)> {
    let client = env.client();
    install_yaml(&client, &workspace().join("deploy/crds/cache.yaml")).await?;
    let ns = env.create_namespace(prefix).await?;
    let (_, kubeconfig) = support::admin_identity(env, &format!("wasmop-{ns}")).await?;
    let module = guest_module(GUEST)?;
    let host = HostProcess::start(
        env,
        &kubeconfig,
        &ns,
        &[
            "--guest",
            &format!("{GUEST}={}", module.display()),
            "--namespace",
            &ns,
        ],
    )?;
    Ok((client, ns, host))
}

async fn create_cache(
    client: &Client,
    ns: &str,
    name: &str,
    spec: serde_json::Value,
) -> anyhow::Result<()> {
    let cache = serde_json::from_value(json!({
        "apiVersion": "apps.example.com/v1alpha1",
        "kind": "Cache",
        "metadata": {"name": name},
        "spec": spec,
    }))?;
    caches(client, ns)
        .create(&PostParams::default(), &cache)
        .await?;
    Ok(())
}

async fn wait_phase(
    client: &Client,
    ns: &str,
    name: &str,
    phase: &str,
) -> anyhow::Result<kube::api::DynamicObject> {
    let api = caches(client, ns);
    wait_for(LONG, || async {
        let c = api.get(name).await?;
        let ok = at(&c, "/status/phase").and_then(|v| v.as_str()) == Some(phase)
            && at(&c, "/status/observedGeneration").and_then(|v| v.as_i64())
                == c.metadata.generation;
        if ok {
            Ok(Some(c))
        } else {
            bail!("status is {:?}", at(&c, "/status"))
        }
    })
    .await
    .with_context(|| format!("Cache {name} never reached phase {phase}"))
}

async fn a_new_cache_gets_owned_labelled_children_and_becomes_ready(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "create").await?;
    create_cache(
        &client,
        &ns,
        "demo",
        json!({"image": "redis:7.2", "replicas": 2, "port": 6379, "config": {"maxmemory": "64mb"}}),
    )
    .await?;
    let cache = wait_phase(&client, &ns, "demo", "Ready").await?;
    ensure!(
        at(&cache, "/status/readyReplicas") == Some(&json!(2)),
        "readyReplicas: {:?}",
        at(&cache, "/status")
    );
    let conditions = at(&cache, "/status/conditions")
        .and_then(|c| c.as_array())
        .context("conditions")?;
    for t in ["Available", "Progressing"] {
        ensure!(
            conditions.iter().any(|c| c["type"] == t),
            "condition {t} missing: {conditions:?}"
        );
    }
    ensure!(
        cache
            .finalizers()
            .iter()
            .any(|f| f == cache_operator::FINALIZER),
        "finalizer missing"
    );

    let uid = cache.uid().context("uid")?;
    let deploy: Deployment = Api::namespaced(client.clone(), &ns).get("demo").await?;
    let svc: Service = Api::namespaced(client.clone(), &ns).get("demo").await?;
    let cm: ConfigMap = Api::namespaced(client.clone(), &ns)
        .get("demo-config")
        .await?;
    for (kind, meta) in [
        ("Deployment", &deploy.metadata),
        ("Service", &svc.metadata),
        ("ConfigMap", &cm.metadata),
    ] {
        let owner = meta
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .with_context(|| format!("{kind} has no owner"))?;
        ensure!(
            owner.uid == uid
                && owner.controller == Some(true)
                && owner.block_owner_deletion == Some(true),
            "{kind} owner: {owner:?}"
        );
        let labels = meta.labels.clone().unwrap_or_default();
        ensure!(
            labels.get("wasmop.dev/guest").map(String::as_str) == Some(GUEST),
            "{kind} labels: {labels:?}"
        );
    }
    let dl = deploy.metadata.labels.clone().unwrap_or_default();
    ensure!(
        dl.get("app").map(String::as_str) == Some("cache")
            && dl.get("cache").map(String::as_str) == Some("demo"),
        "labels {dl:?}"
    );
    let port = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .map(|p| p.port);
    ensure!(port == Some(6379), "service port {port:?}");
    ensure!(
        cm.data
            .unwrap_or_default()
            .get("maxmemory")
            .map(String::as_str)
            == Some("64mb"),
        "config map data"
    );
    Ok(())
}

async fn spec_changes_reach_the_deployment_and_config_changes_roll_the_pods(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "update").await?;
    create_cache(
        &client,
        &ns,
        "web",
        json!({"image": "redis:7.2", "replicas": 1, "config": {"a": "1"}}),
    )
    .await?;
    wait_phase(&client, &ns, "web", "Ready").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let hash_of = |d: &Deployment| {
        d.spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(cache_operator::CONFIG_HASH_ANNOTATION))
            .cloned()
    };
    let before =
        hash_of(&deployments.get("web").await?).context("config hash annotation missing")?;

    let patch = json!({"spec": {"replicas": 3, "image": "redis:7.4", "config": {"a": "2"}}});
    caches(&client, &ns)
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let d = wait_for(LONG, || async {
        let d = deployments.get("web").await?;
        let spec = d.spec.clone().unwrap_or_default();
        let image = spec
            .template
            .spec
            .as_ref()
            .and_then(|p| p.containers.first())
            .and_then(|c| c.image.clone());
        Ok((spec.replicas == Some(3) && image.as_deref() == Some("redis:7.4")).then_some(d))
    })
    .await?;
    let after = hash_of(&d).context("hash")?;
    ensure!(
        after != before,
        "config change must change the pod-template hash ({before} == {after})"
    );
    let cache = wait_phase(&client, &ns, "web", "Ready").await?;
    ensure!(
        cache.metadata.generation == Some(2),
        "generation {:?}",
        cache.metadata.generation
    );
    ensure!(
        at(&cache, "/status/readyReplicas") == Some(&json!(3)),
        "status {:?}",
        at(&cache, "/status")
    );
    Ok(())
}

async fn deleted_and_hand_edited_children_are_restored(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "heal").await?;
    create_cache(
        &client,
        &ns,
        "heal",
        json!({"image": "redis:7.2", "replicas": 2}),
    )
    .await?;
    wait_phase(&client, &ns, "heal", "Ready").await?;

    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let old_uid = services.get("heal").await?.uid();
    services.delete("heal", &DeleteParams::default()).await?;
    wait_for(LONG, || async {
        Ok(services
            .get_opt("heal")
            .await?
            .filter(|s| s.uid() != old_uid)
            .map(|_| ()))
    })
    .await
    .context("deleted Service was not re-created")?;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let edit = json!({"spec": {"replicas": 5}});
    deployments
        .patch("heal", &PatchParams::default(), &Patch::Merge(&edit))
        .await?;
    wait_for(LONG, || async {
        let d = deployments.get("heal").await?;
        Ok((d.spec.and_then(|s| s.replicas) == Some(2)).then_some(()))
    })
    .await
    .context("hand edit of replicas was not reverted")?;
    Ok(())
}

async fn a_paused_cache_is_left_alone_and_says_so(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "pause").await?;
    create_cache(
        &client,
        &ns,
        "p",
        json!({"image": "redis:7.2", "replicas": 1}),
    )
    .await?;
    wait_phase(&client, &ns, "p", "Ready").await?;
    let patch = json!({"spec": {"paused": true}});
    caches(&client, &ns)
        .patch("p", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    wait_phase(&client, &ns, "p", "Paused").await?;
    let patch = json!({"spec": {"replicas": 4, "image": "redis:7.4"}});
    caches(&client, &ns)
        .patch("p", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let cache = wait_phase(&client, &ns, "p", "Paused").await?;
    ensure!(
        cache.metadata.generation == Some(3),
        "generation {:?}",
        cache.metadata.generation
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let d: Deployment = Api::namespaced(client.clone(), &ns).get("p").await?;
    let spec = d.spec.unwrap_or_default();
    ensure!(
        spec.replicas == Some(1),
        "paused Cache changed replicas to {:?}",
        spec.replicas
    );
    let image = spec
        .template
        .spec
        .and_then(|p| p.containers.first().and_then(|c| c.image.clone()));
    ensure!(
        image.as_deref() == Some("redis:7.2"),
        "paused Cache changed the image to {image:?}"
    );
    Ok(())
}

async fn deleting_a_cache_runs_the_finalizer_then_children_are_collected(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "delete").await?;
    create_cache(
        &client,
        &ns,
        "gone",
        json!({"image": "redis:7.2", "replicas": 2}),
    )
    .await?;
    wait_phase(&client, &ns, "gone", "Ready").await?;
    let api = caches(&client, &ns);
    api.delete("gone", &DeleteParams::default()).await?;
    let c = api
        .get("gone")
        .await
        .context("the finalizer must hold the Cache")?;
    ensure!(
        c.metadata.deletion_timestamp.is_some(),
        "no deletionTimestamp"
    );
    wait_for(LONG, || async {
        Ok(api.get_opt("gone").await?.is_none().then_some(()))
    })
    .await
    .context("Cache was never finalized")?;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let reasons: Vec<String> = events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    ensure!(
        reasons.iter().any(|r| r == "CleanupComplete"),
        "no CleanupComplete event among {reasons:?}"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    wait_for(LONG, || async {
        Ok((deployments.get_opt("gone").await?.is_none()
            && configmaps.get_opt("gone-config").await?.is_none())
        .then_some(()))
    })
    .await
    .context("children were not garbage-collected")?;
    Ok(())
}

async fn a_restarted_host_makes_zero_writes_over_converged_objects(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns, mut host) = setup(&env, "zero").await?;
    for name in ["z1", "z2", "z3"] {
        create_cache(
            &client,
            &ns,
            name,
            json!({"image": "redis:7.2", "replicas": 1, "config": {"k": "v"}}),
        )
        .await?;
    }
    for name in ["z1", "z2", "z3"] {
        wait_phase(&client, &ns, name, "Ready").await?;
    }
    // Let the first host settle, then replace it by one with a fresh identity.
    tokio::time::sleep(Duration::from_secs(3)).await;
    host.stop();
    let user = format!("wasmop-restart-{ns}");
    let (_, kubeconfig) = support::admin_identity(&env, &user).await?;
    let module = guest_module(GUEST)?;
    let mut second = HostProcess::start(
        &env,
        &kubeconfig,
        &format!("{ns}-2"),
        &[
            "--guest",
            &format!("{GUEST}={}", module.display()),
            "--namespace",
            &ns,
        ],
    )?;
    for name in ["z1", "z2", "z3"] {
        second
            .wait_for_log(&format!("{name}.{ns}"), LONG)
            .await
            .or_else(|_| {
                // ObjectRef display varies by kube version; fall back to name only.
                if second.log().contains(name) {
                    Ok(())
                } else {
                    bail!("no reconcile of {name} logged")
                }
            })?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes = env.count_writes_by(&user)?;
    ensure!(
        writes == 0,
        "a restarted host over converged objects made {writes} write requests; log:\n{}",
        support::tail(&second.log(), 30)
    );
    ensure!(
        second.log().matches("reconciled").count() >= 3,
        "the restarted host did not reconcile; log:\n{}",
        second.log()
    );
    Ok(())
}

async fn the_crd_rejects_what_its_cel_rule_and_schema_forbid(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    install_yaml(&client, &workspace().join("deploy/crds/cache.yaml")).await?;
    let ns = env.create_namespace("cel").await?;
    for (spec, needle) in [
        (json!({"image": "redis:7.2", "replicas": 0}), "replicas"),
        (json!({"image": "redis:7.2", "replicas": 11}), "replicas"),
        (json!({"image": ""}), "image"),
        (json!({"image": "redis", "port": 70000}), "port"),
    ] {
        let err = create_cache(&client, &ns, "bad", spec.clone())
            .await
            .err()
            .with_context(|| format!("{spec} was accepted"))?;
        ensure!(
            format!("{err:#}").contains(needle),
            "{spec}: error does not mention {needle}: {err:#}"
        );
    }
    create_cache(&client, &ns, "defaults", json!({"image": "redis:7.2"})).await?;
    let c = caches(&client, &ns).get("defaults").await?;
    ensure!(
        at(&c, "/spec/replicas") == Some(&json!(1)) && at(&c, "/spec/port") == Some(&json!(6379)),
        "defaults not applied: {:?}",
        at(&c, "/spec")
    );
    Ok(())
}

async fn the_seeds_null_comparison_rule_is_refused_and_our_has_form_compiles(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let client = env.client();
    let text = std::fs::read_to_string(workspace().join("deploy/crds/cache.yaml"))?;
    let ours = "!has(self.spec.replicas) || self.spec.replicas >= 1";
    ensure!(
        text.contains(ours),
        "deploy/crds/cache.yaml no longer carries the rule this test is about"
    );
    // The same CRD under another group, with the seed's rule instead of ours.
    let seed = text
        .replace(
            ours,
            "self.spec.replicas == null || self.spec.replicas >= 1",
        )
        .replace("caches.apps.example.com", "caches.seed.example.com")
        .replace("group: apps.example.com", "group: seed.example.com");
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&seed)?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let err = api
        .create(&PostParams::default(), &crd)
        .await
        .err()
        .context("the API server accepted the seed's `== null` rule")?;
    let msg = err.to_string();
    ensure!(
        msg.contains("compil") || msg.contains("no matching overload"),
        "unexpected refusal: {msg}"
    );
    // Ours is accepted (installed by the other tests) and fires on its own.
    install_yaml(&client, &workspace().join("deploy/crds/cache.yaml")).await?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    run(wasmop_testenv::tests![
        a_new_cache_gets_owned_labelled_children_and_becomes_ready,
        spec_changes_reach_the_deployment_and_config_changes_roll_the_pods,
        deleted_and_hand_edited_children_are_restored,
        a_paused_cache_is_left_alone_and_says_so,
        deleting_a_cache_runs_the_finalizer_then_children_are_collected,
        a_restarted_host_makes_zero_writes_over_converged_objects,
        the_crd_rejects_what_its_cel_rule_and_schema_forbid,
        the_seeds_null_comparison_rule_is_refused_and_our_has_form_compiles
    ])
}
