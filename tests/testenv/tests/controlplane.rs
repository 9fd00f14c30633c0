//! Proof that the control plane is real: each test relies on behaviour that
//! only the real kube-apiserver, kube-controller-manager, kube-scheduler and
//! kwok provide, and would fail against a mock of the API.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use wasmop_testenv::{TestEnv, harness};

fn main() -> ExitCode {
    harness::run(wasmop_testenv::tests![
        cel_rule_and_openapi_bounds_reject_invalid_custom_objects,
        server_side_apply_conflicts_without_force_and_transfers_ownership_with_force,
        spec_changes_bump_generation_and_status_changes_do_not,
        config_map_owned_by_a_deleted_object_is_garbage_collected,
        deployment_with_two_replicas_becomes_ready_within_sixty_seconds,
        a_never_ready_image_stalls_its_rollout_until_the_deployment_exceeds_its_deadline,
        finalizer_keeps_a_deleted_object_until_it_is_removed,
        minted_users_are_held_to_rbac_and_their_writes_are_audited,
    ])
}

const GROUP: &str = "testenv.wasmop.dev";
const CEL_MESSAGE: &str = "minReplicas must not exceed maxReplicas";

async fn cel_rule_and_openapi_bounds_reject_invalid_custom_objects(
    env: Arc<TestEnv>,
) -> Result<()> {
    let namespace = env.create_namespace("cel").await?;
    let resource = install_crd(
        &env,
        "Autoscaler",
        "autoscalers",
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["minReplicas", "maxReplicas"],
                    "properties": {
                        "minReplicas": { "type": "integer", "minimum": 0, "maximum": 100 },
                        "maxReplicas": { "type": "integer", "minimum": 0, "maximum": 100 },
                    },
                    "x-kubernetes-validations": [{
                        "rule": "self.minReplicas <= self.maxReplicas",
                        "message": CEL_MESSAGE,
                    }],
                },
            },
        }),
        false,
    )
    .await?;
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), &namespace, &resource);
    let object = |name: &str, min: i64, max: i64| {
        DynamicObject::new(name, &resource)
            .data(json!({ "spec": { "minReplicas": min, "maxReplicas": max } }))
    };

    create_when_served(&api, &object("valid", 1, 3))
        .await
        .context("a valid object is accepted")?;

    let status = expect_api_error(
        api.create(&PostParams::default(), &object("inverted", 5, 2))
            .await,
    )?;
    ensure!(
        status.code == 422,
        "CEL violation: expected 422 Invalid, got {status:?}"
    );
    ensure!(
        status.message.contains(CEL_MESSAGE),
        "CEL violation: message lacks the rule's message: {status:?}"
    );

    let status = expect_api_error(
        api.create(&PostParams::default(), &object("too-big", 1, 1000))
            .await,
    )?;
    ensure!(
        status.code == 422,
        "maximum violation: expected 422 Invalid, got {status:?}"
    );
    ensure!(
        status.message.contains("spec.maxReplicas")
            && status.message.contains("less than or equal to 100"),
        "maximum violation: unexpected message: {status:?}"
    );
    Ok(())
}

async fn server_side_apply_conflicts_without_force_and_transfers_ownership_with_force(
    env: Arc<TestEnv>,
) -> Result<()> {
    let namespace = env.create_namespace("ssa").await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &namespace);
    let color = |value: &str| {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "shared" },
            "data": { "color": value },
        })
    };

    api.patch(
        "shared",
        &PatchParams::apply("alice"),
        &Patch::Apply(color("red")),
    )
    .await?;

    let status = expect_api_error(
        api.patch(
            "shared",
            &PatchParams::apply("bob"),
            &Patch::Apply(color("blue")),
        )
        .await,
    )?;
    ensure!(
        status.code == 409,
        "a second manager changing the field must conflict, got {status:?}"
    );
    ensure!(
        status.message.contains("alice"),
        "the conflict names the current owner: {status:?}"
    );

    let map = api
        .patch(
            "shared",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(color("blue")),
        )
        .await?;
    ensure!(
        map.data
            .as_ref()
            .and_then(|data| data.get("color"))
            .map(String::as_str)
            == Some("blue")
    );

    let owners: Vec<&str> = map
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .is_some_and(|fields| !fields.0["f:data"]["f:color"].is_null())
        })
        .filter_map(|entry| entry.manager.as_deref())
        .collect();
    ensure!(
        owners == ["bob"],
        "data.color must be owned by bob alone, owners: {owners:?}"
    );
    Ok(())
}

async fn spec_changes_bump_generation_and_status_changes_do_not(env: Arc<TestEnv>) -> Result<()> {
    let namespace = env.create_namespace("status").await?;
    let resource = install_crd(
        &env,
        "Widget",
        "widgets",
        json!({
            "type": "object",
            "properties": {
                "spec": { "type": "object", "properties": { "size": { "type": "integer" } } },
                "status": { "type": "object", "properties": { "observedSize": { "type": "integer" } } },
            },
        }),
        true,
    )
    .await?;
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), &namespace, &resource);
    let created = create_when_served(
        &api,
        &DynamicObject::new("w", &resource).data(json!({ "spec": { "size": 1 } })),
    )
    .await?;
    ensure!(
        created.metadata.generation == Some(1),
        "a new object has generation 1: {:?}",
        created.metadata
    );

    let merge = PatchParams::default();
    let after_spec = api
        .patch("w", &merge, &Patch::Merge(json!({ "spec": { "size": 2 } })))
        .await?;
    ensure!(
        after_spec.metadata.generation == Some(2),
        "a spec change bumps generation: {:?}",
        after_spec.metadata
    );

    let after_status = api
        .patch_status(
            "w",
            &merge,
            &Patch::Merge(json!({ "status": { "observedSize": 2 } })),
        )
        .await?;
    ensure!(
        after_status.data["status"]["observedSize"] == 2,
        "the status was written: {:?}",
        after_status.data
    );
    ensure!(
        after_status.metadata.resource_version != after_spec.metadata.resource_version,
        "the status change is a new revision"
    );
    ensure!(
        after_status.metadata.generation == Some(2),
        "a status change leaves generation alone: {:?}",
        after_status.metadata
    );

    // Through the main resource, status is ignored: the subresource owns it.
    let ignored = api
        .patch(
            "w",
            &merge,
            &Patch::Merge(json!({ "status": { "observedSize": 99 } })),
        )
        .await?;
    ensure!(
        ignored.data["status"]["observedSize"] == 2,
        "status is only writable through /status"
    );
    Ok(())
}

async fn config_map_owned_by_a_deleted_object_is_garbage_collected(
    env: Arc<TestEnv>,
) -> Result<()> {
    let namespace = env.create_namespace("gc").await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &namespace);
    let owner = api
        .create(&PostParams::default(), &config_map("owner", json!({})))
        .await?;
    let uid = owner.metadata.uid.context("the API server sets uid")?;
    let owned = config_map(
        "owned",
        json!({
            "ownerReferences": [{ "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid }],
        }),
    );
    api.create(&PostParams::default(), &owned).await?;
    let bystander = api
        .create(&PostParams::default(), &config_map("bystander", json!({})))
        .await?;

    api.delete("owner", &DeleteParams::background()).await?;
    let started = Instant::now();
    wait_until(
        Duration::from_secs(60),
        "the garbage collector deletes the owned ConfigMap",
        || async { Ok(api.get_opt("owned").await?.is_none()) },
    )
    .await?;
    eprintln!(
        "garbage collected after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    ensure!(
        api.get_opt("bystander").await?.map(|map| map.metadata.uid) == Some(bystander.metadata.uid),
        "an object without ownerReferences stays"
    );
    Ok(())
}

async fn deployment_with_two_replicas_becomes_ready_within_sixty_seconds(
    env: Arc<TestEnv>,
) -> Result<()> {
    let namespace = env.create_namespace("deployment").await?;
    let api: Api<Deployment> = Api::namespaced(env.client(), &namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                // kwok runs no containers, so the image is never pulled.
                "spec": { "containers": [{ "name": "web", "image": "registry.invalid/web:1" }] },
            },
        },
    }))?;
    api.create(&PostParams::default(), &deployment).await?;

    let started = Instant::now();
    wait_until(Duration::from_secs(60), "2 ready replicas", || async {
        let deployment = api.get("web").await?;
        Ok(deployment.status.and_then(|status| status.ready_replicas) == Some(2))
    })
    .await?;
    eprintln!(
        "deployment ready after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// kwok keeps every Pod whose image contains `never-ready` Running but not
/// Ready, so a rollout to such an image makes no progress, and
/// kube-controller-manager's Deployment controller (not a timer of ours)
/// says so once `progressDeadlineSeconds` have passed: `Progressing=False`,
/// reason `ProgressDeadlineExceeded`. The old Pod keeps serving meanwhile.
async fn a_never_ready_image_stalls_its_rollout_until_the_deployment_exceeds_its_deadline(
    env: Arc<TestEnv>,
) -> Result<()> {
    const DEADLINE: Duration = Duration::from_secs(10);
    let namespace = env.create_namespace("never-ready").await?;
    let api: Api<Deployment> = Api::namespaced(env.client(), &namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 1,
            "progressDeadlineSeconds": DEADLINE.as_secs(),
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "web", "image": "registry.invalid/web:1" }] },
            },
        },
    }))?;
    api.create(&PostParams::default(), &deployment).await?;
    wait_until(Duration::from_secs(60), "the first rollout", || async {
        let d = api.get("web").await?;
        Ok(progressing(&d) == Some(("True".into(), "NewReplicaSetAvailable".into())))
    })
    .await?;

    let patch = json!({"spec": {"template": {"spec": {"containers": [
        { "name": "web", "image": "registry.invalid/web:2-never-ready" }]}}}});
    api.patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let changed = Instant::now();
    wait_until(
        DEADLINE + Duration::from_secs(30),
        "ProgressDeadlineExceeded",
        || async {
            let d = api.get("web").await?;
            Ok(progressing(&d) == Some(("False".into(), "ProgressDeadlineExceeded".into())))
        },
    )
    .await?;
    let elapsed = changed.elapsed();
    eprintln!(
        "ProgressDeadlineExceeded {:.1}s after the change (deadline {DEADLINE:?})",
        elapsed.as_secs_f64()
    );
    ensure!(
        elapsed >= DEADLINE,
        "the rollout was declared failed after {elapsed:?}, before its deadline"
    );

    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.client(), &namespace);
    let mut seen = Vec::new();
    for pod in pods.list(&Default::default()).await? {
        let spec = pod.spec.unwrap_or_default();
        let image = spec.containers[0].image.clone().unwrap_or_default();
        let status = pod.status.unwrap_or_default();
        let ready = status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        seen.push((image, status.phase.unwrap_or_default(), ready));
    }
    seen.sort();
    ensure!(
        seen == [
            (
                "registry.invalid/web:1".to_owned(),
                "Running".to_owned(),
                true
            ),
            (
                "registry.invalid/web:2-never-ready".to_owned(),
                "Running".to_owned(),
                false
            ),
        ],
        "pods (image, phase, ready): {seen:?}"
    );
    Ok(())
}

/// The status and reason of a Deployment's `Progressing` condition.
fn progressing(deployment: &Deployment) -> Option<(String, String)> {
    deployment
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Progressing")
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

async fn finalizer_keeps_a_deleted_object_until_it_is_removed(env: Arc<TestEnv>) -> Result<()> {
    let namespace = env.create_namespace("finalizer").await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &namespace);
    let held = config_map("held", json!({ "finalizers": ["testenv.wasmop.dev/hold"] }));
    api.create(&PostParams::default(), &held).await?;

    api.delete("held", &DeleteParams::default()).await?;
    let terminating = api
        .get("held")
        .await
        .context("a finalizer keeps the object after delete")?;
    ensure!(
        terminating.metadata.deletion_timestamp.is_some(),
        "delete marks the object: {:?}",
        terminating.metadata
    );
    // Nothing removes our finalizer, so the object stays.
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        api.get_opt("held").await?.is_some(),
        "the object waits for its finalizer"
    );

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await?;
    wait_until(
        Duration::from_secs(10),
        "the object to go once its finalizer is removed",
        || async { Ok(api.get_opt("held").await?.is_none()) },
    )
    .await
}

/// Not one of the six proofs of issue 2, but the harness's own promise to the
/// RBAC and zero-write tests: a minted certificate authenticates as the given
/// user and groups (both of them), RBAC holds that user to its bindings, and
/// the audit log counts its writes, refused ones included.
async fn minted_users_are_held_to_rbac_and_their_writes_are_audited(
    env: Arc<TestEnv>,
) -> Result<()> {
    let namespace = env.create_namespace("rbac").await?;
    // The second group is the one bound below, so this also proves that both
    // groups of a certificate count.
    let (alice, kubeconfig) = env.user_kubeconfig("alice", &["team-x", "team-a"]).await?;
    ensure!(kubeconfig.is_file(), "the kubeconfig is written");
    let as_alice: Api<ConfigMap> = Api::namespaced(alice, &namespace);

    let status = expect_api_error(
        as_alice
            .create(&PostParams::default(), &config_map("denied", json!({})))
            .await,
    )?;
    ensure!(
        status.code == 403,
        "an unbound user may not write: {status:?}"
    );
    ensure!(
        status.message.contains("\"alice\""),
        "the refusal names the user: {status:?}"
    );

    let role: Role = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": { "name": "config-map-writer" },
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"] }],
    }))?;
    Api::<Role>::namespaced(env.client(), &namespace)
        .create(&PostParams::default(), &role)
        .await?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": { "name": "team-a-writes-config-maps" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "config-map-writer" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a" }],
    }))?;
    Api::<RoleBinding>::namespaced(env.client(), &namespace)
        .create(&PostParams::default(), &binding)
        .await?;
    // The authorizer's cache takes a moment to see the new binding.
    wait_until(
        Duration::from_secs(10),
        "alice's create to be allowed",
        || async {
            match as_alice
                .create(&PostParams::default(), &config_map("allowed", json!({})))
                .await
            {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.code == 403 => Ok(false),
                Err(err) => Err(err.into()),
            }
        },
    )
    .await?;
    as_alice.get("allowed").await?;

    // At least the refused and the allowed create; a retried create while
    // the binding propagated counts too. Reads do not count.
    wait_until(
        Duration::from_secs(10),
        "alice's writes in the audit log",
        || async { Ok(env.count_writes_by("alice")? >= 2) },
    )
    .await?;
    let gets = env
        .audit_events()?
        .iter()
        .filter(|event| event["user"]["username"] == "alice" && event["verb"] == "get")
        .count();
    ensure!(gets >= 1, "reads are in the audit log too");
    ensure!(env.count_writes_by("nobody")? == 0);
    Ok(())
}

/// A ConfigMap named `name` with `metadata` merged in.
fn config_map(name: &str, metadata: Value) -> ConfigMap {
    let mut object = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata });
    object["metadata"]["name"] = json!(name);
    serde_json::from_value(object).expect("a valid ConfigMap")
}

/// Installs a namespaced CRD `<plural>.testenv.wasmop.dev` (version v1) with
/// `schema`, optionally with the status subresource, and waits until it is
/// Established.
async fn install_crd(
    env: &TestEnv,
    kind: &str,
    plural: &str,
    schema: Value,
    status: bool,
) -> Result<ApiResource> {
    let subresources = if status {
        json!({ "status": {} })
    } else {
        json!({})
    };
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.{GROUP}") },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": { "kind": kind, "plural": plural, "singular": kind.to_ascii_lowercase() },
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": { "openAPIV3Schema": schema },
                "subresources": subresources,
            }],
        },
    }))?;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &crd).await?;
    let name = format!("{plural}.{GROUP}");
    wait_until(
        Duration::from_secs(30),
        "the CRD to be Established",
        || async {
            let crd = crds.get(&name).await?;
            let conditions = crd
                .status
                .and_then(|status| status.conditions)
                .unwrap_or_default();
            Ok(conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True"))
        },
    )
    .await?;
    Ok(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1", kind),
        plural,
    ))
}

/// Creates `object`, retrying while the API server still answers 404 for a
/// CRD that has only just become Established.
async fn create_when_served(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
) -> Result<DynamicObject> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match api.create(&PostParams::default(), object).await {
            Err(kube::Error::Api(status)) if status.code == 404 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            result => return Ok(result?),
        }
    }
}

/// The API error of a request that must fail.
fn expect_api_error<T: std::fmt::Debug>(
    result: kube::Result<T>,
) -> Result<Box<kube::core::Status>> {
    match result {
        Err(kube::Error::Api(status)) => Ok(status),
        Err(other) => bail!("expected an API error, got {other:?}"),
        Ok(value) => bail!("expected the API server to refuse, it accepted: {value:?}"),
    }
}

/// Polls `check` every 200 ms until it returns true or `timeout` passes.
async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
