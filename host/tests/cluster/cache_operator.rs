//! End to end on the real control plane: the cache-operator guest run by the
//! `wasmop` binary. The cases about the guest's behaviour run once per
//! language the cache-operator is written in (Rust, TypeScript, Python,
//! Go), named `rust::<case>`, `ts::`, `python::` and `go::`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmop_testenv::TestEnv;
use wasmop_testenv::Window;
use wasmop_testenv::harness::Test;

use crate::support;
use crate::support::lang::{GUEST, LONG, Lang, per_language, setup, start_host, wait_phase};
use crate::support::{
    HostProcess, at, caches, create_cache, guest_module, install_cache_crd, wait_for, workspace,
};

async fn a_new_cache_gets_owned_labelled_children_and_becomes_ready(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, host) = setup(&env, "create", lang).await?;
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
    // The guest's own log lines (written on a blocking thread) carry the
    // reconcile's span: which guest, which object, which generation.
    let log = host.log();
    let created = log
        .lines()
        .find(|l| l.contains("wasmop::guest") && l.contains("Created"))
        .with_context(|| format!("the guest's log line is missing:\n{log}"))?;
    ensure!(
        created.contains(&format!("object={ns}/demo"))
            && created.contains("guest=cache-operator")
            && created.contains("generation=1"),
        "the guest's log line does not say what it is about: {created}"
    );
    Ok(())
}

async fn spec_changes_reach_the_deployment_and_config_changes_roll_the_pods(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "update", lang).await?;
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
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    // A value changes first: the ConfigMap and the Deployment keep the
    // shape they were created with, so the host applies them unmarked.
    caches(&client, &ns)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"config": {"a": "2"}}})),
        )
        .await?;
    wait_for(LONG, || async {
        let data = config_maps.get("web-config").await?.data;
        Ok((data.unwrap_or_default().get("a").map(String::as_str) == Some("2")).then_some(()))
    })
    .await
    .context("the ConfigMap never took the new value")?;

    // `a` goes, `b` comes: the ConfigMap the host created must lose `a`
    // (the apply after a create owns every field the guest set, also
    // after applies that kept the created shape).
    let patch =
        json!({"spec": {"replicas": 3, "image": "redis:7.4", "config": {"a": null, "b": "2"}}});
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
    let config = wait_for(LONG, || async {
        let data = config_maps
            .get("web-config")
            .await?
            .data
            .unwrap_or_default();
        Ok(data.contains_key("b").then_some(data))
    })
    .await?;
    ensure!(
        config.keys().collect::<Vec<_>>() == ["b"],
        "the ConfigMap kept a key the guest dropped: {config:?}"
    );
    let after = hash_of(&d).context("hash")?;
    ensure!(
        after != before,
        "config change must change the pod-template hash ({before} == {after})"
    );
    // A new image is an upgrade, Ready while the old pods serve: wait for
    // the Cache to report it complete.
    let cache = wait_for(LONG, || async {
        let c = caches(&client, &ns).get("web").await?;
        let done = at(&c, "/status/lastGoodImage") == Some(&json!("redis:7.4"))
            && at(&c, "/status/observedGeneration").and_then(serde_json::Value::as_i64)
                == c.metadata.generation;
        Ok(done.then_some(c))
    })
    .await
    .context("the upgrade to redis:7.4 never completed")?;
    ensure!(
        at(&cache, "/status/phase") == Some(&json!("Ready")),
        "status {:?}",
        at(&cache, "/status")
    );
    // Two spec changes: the value, then the rest.
    ensure!(
        cache.metadata.generation == Some(3),
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

async fn deleted_and_hand_edited_children_are_restored(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "heal", lang).await?;
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

async fn a_paused_cache_is_left_alone_and_says_so(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "pause", lang).await?;
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
    let mut window = Window::new(Duration::from_secs(2));
    while window.next().await {
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
    }
    Ok(())
}

async fn deleting_a_cache_runs_the_finalizer_then_children_are_collected(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "delete", lang).await?;
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
    // Scaling the Deployment the host created to zero keeps its shape:
    // one apply, no patch marking the create's field-manager entry.
    let patches: Vec<_> = env
        .audit_events_of(&format!("wasmop-{ns}"))?
        .into_iter()
        .filter(|e| {
            e["verb"] == "patch"
                && e["objectRef"]["resource"] == "deployments"
                && e["objectRef"]["name"] == "gone"
        })
        .map(|e| e["requestURI"].as_str().unwrap_or_default().to_owned())
        .collect();
    ensure!(
        patches.len() == 1 && patches[0].contains("fieldManager="),
        "the host wrote the Deployment other than by one apply: {patches:?}"
    );
    Ok(())
}

async fn a_restarted_host_makes_zero_writes_over_converged_objects(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, mut host) = setup(&env, "zero", lang).await?;
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
    support::writes_settle(&env, &format!("wasmop-{ns}")).await?;
    host.stop();
    let user = format!("wasmop-restart-{ns}");
    let (_, kubeconfig) = support::admin_identity(&env, &user).await?;
    let mut second = start_host(&env, &kubeconfig, &format!("{ns}-2"), &ns, lang).await?;
    for name in ["z1", "z2", "z3"] {
        // Each reconcile's span names the object as namespace/name.
        second
            .wait_for_log(&format!("object={ns}/{name}"), LONG)
            .await?;
    }
    let mut window = Window::new(Duration::from_secs(3));
    while window.next().await {
        let writes = env.count_writes_by(&user)?;
        ensure!(
            writes == 0,
            "a restarted host over converged objects made {writes} write requests; log:\n{}",
            support::tail(&second.log(), 30)
        );
    }
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
    install_cache_crd(&client).await?;
    let ns = env.create_namespace("cel").await?;
    for (spec, needle) in [
        (json!({"image": "redis:7.2", "replicas": 0}), "replicas"),
        (json!({"image": "redis:7.2", "replicas": 11}), "replicas"),
        (json!({"image": ""}), "image"),
        (json!({"image": "redis", "port": 70000}), "port"),
        (
            json!({"image": "redis:7.2", "upgrade": {"timeoutSeconds": 29}}),
            "timeoutSeconds",
        ),
        (
            json!({"image": "redis:7.2", "upgrade": {"timeoutSeconds": 3601}}),
            "timeoutSeconds",
        ),
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
    create_cache(
        &client,
        &ns,
        "upgrade-defaults",
        json!({"image": "redis:7.2", "upgrade": {}}),
    )
    .await?;
    let c = caches(&client, &ns).get("upgrade-defaults").await?;
    ensure!(
        at(&c, "/spec/upgrade/timeoutSeconds") == Some(&json!(300)),
        "timeoutSeconds not defaulted: {:?}",
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
    install_cache_crd(&client).await?;
    Ok(())
}

/// Applies a ValidatingAdmissionPolicy that refuses every Service in `ns`
/// (the test plane runs no ResourceQuota controller, so a quota would not be
/// enforced); returns a closure-free way to remove it: its name.
async fn refuse_services(client: &Client, ns: &str) -> anyhow::Result<String> {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let name = format!("no-services-{ns}");
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["services"]}]},
            "validations": [{"expression": "false", "message": "no Services here for now"}],
        },
    }))?;
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}},
    }))?;
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await?;
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await?;
    // Admission policies take effect a moment after they are created: wait
    // until a Service is refused.
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let probe: Service = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "probe"}, "spec": {"ports": [{"port": 80}]}}))?;
    wait_for(LONG, || async {
        match services.create(&PostParams::default(), &probe).await {
            Err(kube::Error::Api(e)) if e.message.contains("no Services here") => Ok(Some(())),
            Ok(_) => {
                services.delete("probe", &DeleteParams::default()).await?;
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    Ok(name)
}

async fn allow_services_again(client: &Client, name: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await?;
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await?;
    Ok(())
}

async fn a_failure_that_recovered_leaves_nothing_to_write_after_a_restart(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env
        .create_namespace(&format!("recover-{}", lang.suffix()))
        .await?;
    let policy = refuse_services(&client, &ns).await?;
    let (_, kubeconfig) = support::admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let mut host = start_host(&env, &kubeconfig, &ns, &ns, lang).await?;
    create_cache(
        &client,
        &ns,
        "r",
        json!({"image": "redis:7.2", "replicas": 1}),
    )
    .await?;
    // The Service is refused: the host records the failure on the Cache.
    wait_for(LONG, || async {
        let c = caches(&client, &ns).get("r").await?;
        let failed = at(&c, "/status/conditions")
            .and_then(|c| c.as_array())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c["type"] == "GuestReconciled"
                        && c["status"] == "False"
                        && c["reason"] == "ApplyFailed"
                })
            });
        Ok(failed.then_some(()))
    })
    .await
    .context("the refused Service was not reported")?;
    allow_services_again(&client, &policy).await?;
    let cache = wait_phase(&client, &ns, "r", "Ready").await?;
    wait_for(LONG, || async {
        let c = caches(&client, &ns).get("r").await?;
        let recovered = at(&c, "/status/conditions")
            .and_then(|c| c.as_array())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "GuestReconciled" && c["status"] == "True")
            });
        Ok(recovered.then_some(()))
    })
    .await
    .with_context(|| {
        format!(
            "the host condition did not recover: {:?}",
            at(&cache, "/status")
        )
    })?;
    support::writes_settle(&env, &format!("wasmop-{ns}")).await?;
    host.stop();
    // A restarted host over the converged parent writes nothing at all.
    let user = format!("wasmop-recovered-{ns}");
    let (_, kubeconfig) = support::admin_identity(&env, &user).await?;
    let mut second = start_host(&env, &kubeconfig, &format!("{ns}-2"), &ns, lang).await?;
    second.wait_for_log(&format!("object={ns}/r"), LONG).await?;
    let mut window = Window::new(Duration::from_secs(3));
    while window.next().await {
        let writes = support::successful_writes_by(&env, &user)?;
        ensure!(
            writes.is_empty() && env.count_writes_by(&user)? == 0,
            "after a recovered failure, a restarted host wrote {writes:?}; log:\n{}",
            support::tail(&second.log(), 30)
        );
    }
    // Each manager owns exactly its part of the conditions.
    let raw: serde_json::Value = client
        .request(
            http::Request::get(format!(
                "/apis/apps.example.com/v1alpha1/namespaces/{ns}/caches/r?showManagedFields=true"
            ))
            .body(Vec::new())?,
        )
        .await?;
    for entry in raw["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let fields = entry["fieldsV1"].to_string();
        if entry["manager"] == format!("wasmop-{GUEST}") {
            ensure!(
                !fields.contains("GuestReconciled"),
                "the guest's manager owns the host condition: {fields}"
            );
        }
    }
    Ok(())
}

async fn a_paused_cache_writes_nothing_to_its_children_and_keeps_what_others_set(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "keep", lang).await?;
    let user = format!("wasmop-{ns}");
    create_cache(
        &client,
        &ns,
        "k",
        json!({"image": "redis:7.2", "replicas": 1}),
    )
    .await?;
    wait_phase(&client, &ns, "k", "Ready").await?;
    // Someone else sets an annotation and a field the guest never sets.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let foreign = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "k", "annotations": {"team.example.com/owner": "team-a"}},
        "spec": {"minReadySeconds": 5}});
    deployments
        .patch(
            "k",
            &PatchParams::apply("someone-else"),
            &Patch::Apply(&foreign),
        )
        .await?;
    caches(&client, &ns)
        .patch(
            "k",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": true}})),
        )
        .await?;
    wait_phase(&client, &ns, "k", "Paused").await?;
    support::writes_settle(&env, &user).await?;
    let child_writes = |env: &TestEnv| -> anyhow::Result<usize> {
        Ok(support::successful_writes_by(env, &user)?
            .iter()
            .filter(|(_, r, _, _)| matches!(r.as_str(), "deployments" | "services" | "configmaps"))
            .count())
    };
    let before = child_writes(&env)?;
    caches(&client, &ns)
        .patch(
            "k",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 3, "image": "redis:7.4"}})),
        )
        .await?;
    let paused = wait_phase(&client, &ns, "k", "Paused").await?;
    ensure!(
        paused.metadata.generation == Some(3),
        "generation {:?}",
        paused.metadata.generation
    );
    let mut window = Window::new(Duration::from_secs(2));
    while window.next().await {
        let during = child_writes(&env)? - before;
        ensure!(
            during == 0,
            "a paused Cache's change wrote {during} times to its children"
        );
    }
    caches(&client, &ns)
        .patch(
            "k",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": false}})),
        )
        .await?;
    wait_for(LONG, || async {
        let d = deployments.get("k").await?;
        Ok((d.spec.as_ref().and_then(|s| s.replicas) == Some(3)).then_some(d))
    })
    .await
    .context("unpausing did not apply the spec")?;
    let d = deployments.get("k").await?;
    ensure!(
        d.annotations()
            .get("team.example.com/owner")
            .map(String::as_str)
            == Some("team-a"),
        "the foreign annotation was lost: {:?}",
        d.annotations()
    );
    ensure!(
        d.spec.as_ref().and_then(|s| s.min_ready_seconds) == Some(5),
        "the foreign field was lost"
    );
    let raw: serde_json::Value = client
        .request(
            http::Request::get(format!(
                "/apis/apps/v1/namespaces/{ns}/deployments/k?showManagedFields=true"
            ))
            .body(Vec::new())?,
        )
        .await?;
    for entry in raw["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if entry["manager"] == format!("wasmop-{GUEST}") {
            let fields = entry["fieldsV1"].to_string();
            ensure!(
                !fields.contains("team.example.com/owner") && !fields.contains("minReadySeconds"),
                "the guest's manager claims what someone else set: {fields}"
            );
        }
    }
    Ok(())
}

async fn a_child_watch_the_host_may_not_list_is_reported_instead_of_waited_for(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env.create_namespace("watchfail").await?;
    let (_, kubeconfig) = support::least_privilege(&env, &ns, &ns, &[GUEST]).await?;
    // Take Services away from the host's role.
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let mut role = roles.get(&format!("wasmop-{ns}")).await?;
    role.rules
        .get_or_insert_with(Vec::new)
        .retain(|r| !r.resources.iter().flatten().any(|x| x == "services"));
    role.metadata.managed_fields = None;
    roles
        .patch(
            &format!("wasmop-{ns}"),
            &PatchParams::apply("wasmop-tests").force(),
            &Patch::Apply(&role),
        )
        .await?;
    let module = guest_module(GUEST)?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &[
            "--guest",
            &format!("{GUEST}={}", module.display()),
            "--namespace",
            &ns,
        ],
    )?;
    create_cache(&client, &ns, "blind", json!({"image": "redis:7.2"})).await?;
    let note = support::wait_for_event(&client, &ns, "blind", "WatchFailed", LONG).await?;
    ensure!(
        note.contains("v1/Service") && note.contains("forbidden"),
        "{note:?}"
    );
    host.wait_for_log("watch of a child kind failed", LONG)
        .await?;
    let warned = host
        .log()
        .lines()
        .any(|l| l.contains(" WARN ") && l.contains("watch of a child kind failed"));
    ensure!(warned, "the watch error was not logged at warn");
    ensure!(host.is_running(), "the host died");
    Ok(())
}

/// The tests of this module.
pub fn tests() -> Vec<Test> {
    let mut tests = wasmop_testenv::tests![
        a_child_watch_the_host_may_not_list_is_reported_instead_of_waited_for,
        the_crd_rejects_what_its_cel_rule_and_schema_forbid,
        the_seeds_null_comparison_rule_is_refused_and_our_has_form_compiles
    ];
    for lang in Lang::ALL {
        tests.extend(per_language![lang;
            a_failure_that_recovered_leaves_nothing_to_write_after_a_restart,
            a_paused_cache_writes_nothing_to_its_children_and_keeps_what_others_set,
            a_new_cache_gets_owned_labelled_children_and_becomes_ready,
            spec_changes_reach_the_deployment_and_config_changes_roll_the_pods,
            deleted_and_hand_edited_children_are_restored,
            a_paused_cache_is_left_alone_and_says_so,
            deleting_a_cache_runs_the_finalizer_then_children_are_collected,
            a_restarted_host_makes_zero_writes_over_converged_objects,
        ]);
    }
    tests
}
