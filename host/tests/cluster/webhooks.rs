//! End to end on the real control plane: admission and conversion served by
//! guests (issue: admission and conversion served by guests,
//! hot-swappable). The API server calls the host: `kubectl apply` is
//! defaulted and refused by the cache-operator's `admit`, objects are read
//! in both versions through its `convert`, a module swap changes a verdict,
//! and a looping `admit` is answered as its failure policy says.
//!
//! The cache-operator in each language (Rust, TypeScript, Python) runs on
//! the shipped two-version CRD, its admission and conversion served by the
//! host: `rust::<case>`, `ts::`, `python::`.
//!
//! Each test uses a Cache CRD of its own group (the setting `apiGroup`), so
//! the cluster-wide CRD conversion of one test never reaches another; each
//! guest watches only its namespace, which its webhooks' namespace selector
//! follows.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};
use wasmop_testenv::TestEnv;
use wasmop_testenv::harness::Test;

use crate::support;
use crate::support::guests::{Entry, GuestList};
use crate::support::lang::{Lang, compiled_modules, per_language};
use crate::support::{
    HostProcess, admin_identity, cache_crd, dyn_api, guest_module, install_crd, install_yaml,
    kubectl, put_guest_list, put_module, wait_for, webhook_host, webhook_host_with, workspace,
};

const LONG: Duration = Duration::from_secs(120);
const LIST: &str = support::WEBHOOK_LIST;

/// The guest list entry of the cache-operator in module ConfigMap `module`,
/// for Caches of `group` in `version`, in `ns` only.
fn cache_entry(ns: &str, group: &str, version: &str) -> Entry {
    Entry::config_map(&guest_of(group), "module")
        .namespaces([ns])
        .with("settings", json!({"apiGroup": group, "version": version}))
}

/// The guest serving `group`: `cache-<first label>`, so that the
/// cluster-wide webhook configurations of the tests (`wasmop-<guest>`) are
/// each their own.
fn guest_of(group: &str) -> String {
    format!("cache-{}", group.split('.').next().unwrap_or(group))
}

/// Installs the two-version Cache CRD of `deploy/` under `group`.
async fn install_two_versions(client: &kube::Client, group: &str) -> anyhow::Result<()> {
    install_crd(client, serde_json::from_value(cache_crd(group)?)?).await
}

/// Waits until the host wrote both webhook configurations of guest `cache`
/// and returns the validating one.
async fn configured(
    client: &kube::Client,
    group: &str,
) -> anyhow::Result<ValidatingWebhookConfiguration> {
    let name = format!("wasmop-{}", guest_of(group));
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    wait_for(LONG, || async {
        match (
            validating.get_opt(&name).await?,
            mutating.get_opt(&name).await?,
        ) {
            (Some(v), Some(_)) => Ok(Some(v)),
            _ => bail!("the webhook configurations {name} are not written yet"),
        }
    })
    .await
}

/// Waits until the CRD of `group` converts through the host.
async fn converting(client: &kube::Client, group: &str) -> anyhow::Result<()> {
    converting_at(client, group, &guest_of(group)).await
}

/// Waits until the CRD of `group` converts through guest `guest` of the host.
async fn converting_at(client: &kube::Client, group: &str, guest: &str) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for(LONG, || async {
        let crd = crds.get(&format!("caches.{group}")).await?;
        let url = crd
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.url)
            .unwrap_or_default();
        if url.starts_with("https://127.0.0.1:") && url.ends_with(&format!("/convert/{guest}")) {
            Ok(Some(()))
        } else {
            bail!("the CRD's conversion URL is {url:?}")
        }
    })
    .await
}

fn caches_in(client: &kube::Client, group: &str, version: &str, ns: &str) -> Api<DynamicObject> {
    dyn_api(client, group, version, "Cache", "caches", ns)
}

fn cache_yaml(group: &str, version: &str, ns: &str, name: &str, spec: &Value) -> String {
    serde_json::to_string(&json!({
        "apiVersion": format!("{group}/{version}"), "kind": "Cache",
        "metadata": {"name": name, "namespace": ns}, "spec": spec,
    }))
    .expect("json")
}

/// The two-version Cache CRD under `group`, a namespace `prefix-…`, and
/// in it the cache-operator's module and a guest list serving `group` in
/// `v1beta1` with the deadline `timeout`. Returns the namespace.
async fn setup(env: &TestEnv, group: &str, prefix: &str, timeout: &str) -> anyhow::Result<String> {
    let client = env.client();
    install_two_versions(&client, group).await?;
    let ns = env.create_namespace(prefix).await?;
    put_module(
        &client,
        &ns,
        "module",
        "module.wasm",
        &std::fs::read(guest_module("cache-operator")?)?,
    )
    .await?;
    let entry = cache_entry(&ns, group, "v1beta1").with("timeout", timeout);
    put_guest_list(&client, &ns, LIST, &GuestList::of([entry]).yaml()).await?;
    Ok(ns)
}

async fn kubectl_apply_is_defaulted_and_refused_by_the_guest(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    const GROUP: &str = "admit.example.com";
    let client = env.client();
    let ns = setup(&env, GROUP, "admit", "2s").await?;
    // The certificate from a Secret the host creates when absent.
    let secret_ref = format!("{ns}/webhook-tls");
    let mut host = webhook_host_with(&env, &ns, &["--webhook-cert-secret", &secret_ref]).await?;
    host.wait_for_log("serving webhooks on", LONG).await?;
    let config = configured(&client, GROUP).await?;
    let webhook = &config.webhooks.context("no webhooks")?[0];
    let secret = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), &ns)
        .get("webhook-tls")
        .await
        .context("the host did not create its certificate's Secret")?;
    ensure!(
        secret.type_.as_deref() == Some("kubernetes.io/tls"),
        "Secret type {:?}",
        secret.type_
    );
    let ca = secret
        .data
        .unwrap_or_default()
        .get("ca.crt")
        .cloned()
        .context("no ca.crt")?;
    ensure!(
        webhook.client_config.ca_bundle.as_ref() == Some(&ca),
        "the caBundle is not the Secret's ca.crt"
    );
    ensure!(
        webhook.failure_policy.as_deref() == Some("Fail"),
        "failurePolicy {:?}",
        webhook.failure_policy
    );
    ensure!(
        webhook.timeout_seconds == Some(3),
        "timeoutSeconds {:?} for a 2 s deadline",
        webhook.timeout_seconds
    );
    converting(&client, GROUP).await?;

    // No tag: refused with the guest's message, nothing stored.
    let bad = cache_yaml(
        GROUP,
        "v1alpha1",
        &ns,
        "untagged",
        &json!({"image": "redis"}),
    );
    let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&bad))?;
    ensure!(!ok, "kubectl applied a Cache with image redis");
    ensure!(
        stderr.contains("denied the request") && stderr.contains("has no tag"),
        "not the guest's message: {stderr}"
    );
    ensure!(
        caches_in(&client, GROUP, "v1alpha1", &ns)
            .get_opt("untagged")
            .await?
            .is_none(),
        "the refused Cache was stored"
    );
    // An unknown Redis directive: refused, naming the key.
    let unknown = cache_yaml(
        GROUP,
        "v1alpha1",
        &ns,
        "unknown",
        &json!({"image": "redis:7.2", "config": {"maxmemory": "64mb", "no-such-directive": "1"}}),
    );
    let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&unknown))?;
    ensure!(
        !ok && stderr.contains("\"no-such-directive\""),
        "unknown directive: {stderr}"
    );

    // A valid one is defaulted: visible on `kubectl get -o yaml`.
    let good = cache_yaml(
        GROUP,
        "v1alpha1",
        &ns,
        "good",
        &json!({"image": "redis:7.2", "replicas": 1, "config": {"maxmemory": "64mb"}}),
    );
    let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&good))?;
    ensure!(ok, "kubectl apply of a valid Cache failed: {stderr}");
    let (ok, yaml, stderr) = kubectl(
        &env,
        &[
            "get",
            &format!("caches.v1alpha1.{GROUP}"),
            "good",
            "-n",
            &ns,
            "-o",
            "yaml",
        ],
        None,
    )?;
    ensure!(ok, "kubectl get: {stderr}");
    let got: Value = serde_saphyr::from_str(&yaml)?;
    ensure!(
        got["spec"]["config"]["maxmemory-policy"] == "allkeys-lru"
            && got["spec"]["config"]["maxmemory"] == "64mb",
        "not defaulted: {}",
        got["spec"]
    );
    // The reconcile reads the stored version (v1beta1) through the guest's
    // conversion and builds the Deployment.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    wait_for(LONG, || async {
        match deployments.get_opt("good").await? {
            Some(_) => Ok(Some(())),
            None => bail!("no Deployment good yet"),
        }
    })
    .await?;
    // The webhook metrics count what was served.
    let guest = guest_of(GROUP);
    let (_, metrics) = support::http_get(host.endpoint("metrics").await?, "/metrics").await?;
    ensure!(
        metrics.contains(
            &format!("controller_runtime_webhook_requests_total{{webhook=\"/validate/{guest}\",code=\"200\"}}")
        ) && metrics.contains(
            &format!("controller_runtime_webhook_latency_seconds_count{{webhook=\"/mutate/{guest}\"}}")
        ) && metrics
            .contains(&format!("controller_runtime_webhook_requests_in_flight{{webhook=\"/convert/{guest}\"}}")),
        "webhook metrics missing:\n{}",
        metrics
            .lines()
            .filter(|l| l.contains("webhook"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok(())
}

async fn objects_read_back_in_both_versions_unchanged_in_meaning(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    const GROUP: &str = "convert.example.com";
    let client = env.client();
    // Before v1beta1 is served: v1alpha1 alone, stored as v1alpha1.
    let alpha_only = wasmop_testenv::crd::single_version(cache_crd(GROUP)?, "v1alpha1")?;
    install_crd(&client, serde_json::from_value(alpha_only)?).await?;
    let ns = env.create_namespace("convert").await?;
    let sample: Value = serde_saphyr::from_str(&std::fs::read_to_string(
        workspace().join("deploy/samples/cache.yaml"),
    )?)?;
    let old_spec = json!({"image": "redis:7.2", "replicas": 3, "port": 7000,
        "config": {"maxmemory": "64mb", "maxmemory-policy": "noeviction"}, "paused": true});
    let alpha = caches_in(&client, GROUP, "v1alpha1", &ns);
    for (name, spec) in [("old", &old_spec), ("sample", &sample["spec"])] {
        let object = serde_json::from_str(&cache_yaml(GROUP, "v1alpha1", &ns, name, spec))?;
        alpha.create(&PostParams::default(), &object).await?;
    }
    // Now both versions, v1beta1 stored, converted by the host's guest.
    install_two_versions(&client, GROUP).await?;
    put_module(
        &client,
        &ns,
        "module",
        "module.wasm",
        &std::fs::read(guest_module("cache-operator")?)?,
    )
    .await?;
    // The deadline is not under test here: 10 s, so that a loaded machine
    // does not fail a conversion at the default 1 s.
    let list = GuestList::of([cache_entry(&ns, GROUP, "v1beta1").with("timeout", "10s")]);
    put_guest_list(&client, &ns, LIST, &list.yaml()).await?;
    let mut host = webhook_host(&env, &ns).await?;
    host.wait_for_log("serving webhooks on", LONG).await?;
    converting(&client, GROUP).await?;

    // The API server takes up a CRD's new conversion a moment after the
    // CRD says it: each read that converts is polled until it converts
    // (a timeout names the last answer).
    let beta = caches_in(&client, GROUP, "v1beta1", &ns);
    wait_for(LONG, || async {
        let read = beta.get("old").await?;
        let spec = &read.data["spec"];
        if spec["ports"] == json!({"client": 7000})
            && spec["config"]
                == json!([{"name": "maxmemory", "value": "64mb"}, {"name": "maxmemory-policy", "value": "noeviction"}])
            && spec["replicas"] == 3
            && spec.get("port").is_none()
        {
            Ok(Some(()))
        } else {
            bail!("v1alpha1 object read as v1beta1: {spec}")
        }
    })
    .await
    .with_context(|| host_tail(&host))?;
    for (name, spec) in [("old", &old_spec), ("sample", &sample["spec"])] {
        let back = alpha.get(name).await?;
        for (field, value) in spec.as_object().context("spec")? {
            ensure!(
                &back.data["spec"][field] == value,
                "{name}: spec.{field} is {} read back as v1alpha1, was {value}",
                back.data["spec"][field]
            );
        }
    }
    // A v1beta1 object reads as v1alpha1.
    let new_spec = json!({"image": "redis:7.4", "replicas": 2, "ports": {"client": 6380},
        "config": [{"name": "maxmemory", "value": "32mb"}]});
    beta.create(
        &PostParams::default(),
        &serde_json::from_str(&cache_yaml(GROUP, "v1beta1", &ns, "new", &new_spec))?,
    )
    .await?;
    wait_for(LONG, || async {
        let read = alpha.get("new").await?;
        let spec = &read.data["spec"];
        if spec["port"] == 6380
            && spec["config"]["maxmemory"] == "32mb"
            && spec["config"]["maxmemory-policy"] == "allkeys-lru"
        {
            Ok(Some(()))
        } else {
            bail!("v1beta1 object read as v1alpha1: {spec}")
        }
    })
    .await
    .with_context(|| host_tail(&host))?;
    // And a write in v1alpha1 updates what v1beta1 shows. The host
    // reconciles the Cache meanwhile (its finalizer, its status): a
    // conflict (409) reads it again.
    wait_for(LONG, || async {
        let mut update = alpha.get("new").await?;
        update.data["spec"]["port"] = json!(6390);
        alpha
            .replace("new", &PostParams::default(), &update)
            .await?;
        Ok(Some(()))
    })
    .await?;
    let port = beta.get("new").await?.data["spec"]["ports"]["client"].clone();
    ensure!(
        port == 6390,
        "update through v1alpha1: v1beta1 shows port {port}"
    );
    Ok(())
}

async fn a_swap_changes_verdicts_and_a_looping_admit_obeys_its_policy(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    const GROUP: &str = "swap.example.com";
    let client = env.client();
    // The cache-operator's deadline is not under test here (the hostile
    // guest's is): 10 s, so that a loaded machine does not fail its admits.
    let ns = setup(&env, GROUP, "admit-swap", "10s").await?;
    let mut host = webhook_host(&env, &ns).await?;
    host.wait_for_log("serving webhooks on", LONG).await?;
    configured(&client, GROUP).await?;
    converting(&client, GROUP).await?;
    let pid = host.pid();
    let single = |name: &str| {
        cache_yaml(
            GROUP,
            "v1alpha1",
            &ns,
            name,
            &json!({"image": "redis:7.2", "replicas": 1}),
        )
    };
    let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&single("one")))?;
    ensure!(ok, "v1 admits a single replica: {stderr}");

    // v2 refuses a single replica: the swap changes the verdict for the
    // next request, without a restart.
    put_module(
        &client,
        &ns,
        "module",
        "module.wasm",
        &std::fs::read(guest_module("cache-operator-v2")?)?,
    )
    .await?;
    host.wait_for_log("swapped guest module", LONG).await?;
    let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&single("two")))?;
    ensure!(
        !ok && stderr.contains("PodDisruptionBudget"),
        "v2 admitted a single replica: {stderr}"
    );
    ensure!(host.pid() == pid && host.is_running(), "the host restarted");

    // A hostile admit that never returns, for its own kind: denied at the
    // guest's 1 s deadline under Fail, naming the guest.
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    put_module(
        &client,
        &ns,
        "hostile",
        "module.wasm",
        &std::fs::read(guest_module("hostile")?)?,
    )
    .await?;
    let list = |policy: &str| {
        GuestList::of([
            cache_entry(&ns, GROUP, "v1beta1").with("timeout", "10s"),
            Entry::config_map("hostile", "hostile")
                .namespaces([&ns])
                .with("timeout", "1s")
                .with("admissionFailurePolicy", policy),
        ])
        .yaml()
    };
    put_guest_list(&client, &ns, LIST, &list("Fail")).await?;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let policy_is = |policy: &'static str| {
        let validating = validating.clone();
        async move {
            wait_for(LONG, || async {
                let c = validating.get_opt("wasmop-hostile").await?;
                let have = c
                    .and_then(|c| c.webhooks)
                    .and_then(|w| w[0].failure_policy.clone());
                if have.as_deref() == Some(policy) {
                    Ok(Some(()))
                } else {
                    bail!("wasmop-hostile failurePolicy {have:?}")
                }
            })
            .await
        }
    };
    policy_is("Fail").await?;
    // The host answers at the guest's 1 s deadline, before the API server's
    // own timeoutSeconds (2 s): the denial is the host's, naming the guest
    // and its deadline, not the API server's "context deadline exceeded".
    let timeout = validating
        .get("wasmop-hostile")
        .await?
        .webhooks
        .and_then(|w| w[0].timeout_seconds);
    ensure!(
        timeout == Some(2),
        "timeoutSeconds {timeout:?} for a 1 s deadline"
    );
    apply_looping_until(&env, &ns, "spin", |ok, stderr| {
        ensure!(!ok, "a looping admit admitted under Fail");
        ensure!(
            stderr.contains("wasmop guest \\\"hostile\\\" failed to admit")
                || stderr.contains("wasmop guest \"hostile\" failed to admit"),
            "the denial does not name the guest: {stderr}"
        );
        ensure!(
            stderr.contains("the guest ran longer than 1s and was interrupted"),
            "not the host's deadline: {stderr}"
        );
        Ok(())
    })
    .await?;
    // Under Ignore the same request is admitted, with a warning.
    put_guest_list(&client, &ns, LIST, &list("Ignore")).await?;
    policy_is("Ignore").await?;
    let stderr = apply_looping_until(&env, &ns, "ignored", |ok, stderr| {
        ensure!(ok, "a looping admit was not ignored under Ignore: {stderr}");
        Ok(())
    })
    .await?;
    ensure!(
        stderr.contains("Warning") && stderr.contains("admissionFailurePolicy Ignore"),
        "no warning: {stderr}"
    );
    ensure!(host.is_running(), "the host died");
    Ok(())
}

/// Applies a Hostile whose admit never returns, under a new name
/// (`<prefix>-<n>`) each time, until `holds` accepts kubectl's answer
/// (whether it applied, its stderr), and returns that stderr. The API server
/// takes up a webhook configuration a moment after it is written, and a
/// loaded machine may answer after the API server's own timeout; each try
/// is an object of its own (one admitted before the configuration took
/// effect stays). A timeout names the last answer.
async fn apply_looping_until(
    env: &TestEnv,
    ns: &str,
    prefix: &str,
    holds: impl Fn(bool, &str) -> anyhow::Result<()>,
) -> anyhow::Result<String> {
    let mut tries = 0;
    wait_for(LONG, || {
        tries += 1;
        let object = json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
            "metadata": {"name": format!("{prefix}-{tries}"), "namespace": ns},
            "spec": {"attack": "admit-loop"}});
        let holds = &holds;
        async move {
            let (ok, _, stderr) = kubectl(env, &["apply", "-f", "-"], Some(&object.to_string()))?;
            holds(ok, &stderr)?;
            Ok(Some(stderr))
        }
    })
    .await
}

async fn hostile_verdicts_are_refused_before_the_api_server_sees_them(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let ns = env.create_namespace("hostile-admit").await?;
    put_module(
        &client,
        &ns,
        "hostile",
        "module.wasm",
        &std::fs::read(guest_module("hostile")?)?,
    )
    .await?;
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([Entry::config_map(&format!("hostile-{ns}"), "hostile")
            .namespaces([&ns])
            .with("timeout", "1s")])
        .yaml(),
    )
    .await?;
    let mut host = webhook_host(&env, &ns).await?;
    host.wait_for_log("serving webhooks on", LONG).await?;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let name = format!("wasmop-hostile-{ns}");
    wait_for(LONG, || async {
        match validating.get_opt(&name).await? {
            Some(_) => Ok(Some(())),
            None => bail!("no {name} yet"),
        }
    })
    .await?;
    let hostiles = dyn_api(
        &client,
        "test.wasmop.dev",
        "v1alpha1",
        "Hostile",
        "hostiles",
        &ns,
    );
    // A harmless object is admitted and labelled by the mutating call.
    let ok = hostiles
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile", "metadata": {"name": "fine"}, "spec": {"attack": "none"}}))?)
        .await?;
    ensure!(
        ok.labels().get("hostile").map(String::as_str) == Some("admitted"),
        "not mutated: {:?}",
        ok.metadata.labels
    );
    for (attack, says) in [
        ("admit-rename", "metadata.name"),
        ("admit-owner", "metadata.ownerReferences"),
        ("admit-finalizer", "metadata.finalizers"),
        ("admit-host-label", "wasmop.dev/guest"),
        ("admit-status", "status"),
        ("admit-kind", "kind"),
        ("admit-bad-patch", "not a JSON Patch"),
        // The work of applying a patch is the guest's, bounded by its limits.
        ("admit-copy-bomb", "maxResponseBytes"),
        ("admit-front-inserts", "at most 4096"),
        ("admit-bad-code", "not an HTTP error status"),
        ("admit-warnings", "1000 warnings"),
        ("admit-memory", "memory limit exceeded"),
        ("admit-trap", "guest trapped"),
        ("admit-deny", "hostile says no"),
    ] {
        let object = serde_json::from_value(
            json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
            "metadata": {"name": attack}, "spec": {"attack": attack}}),
        )?;
        match hostiles.create(&PostParams::default(), &object).await {
            Ok(_) => bail!("{attack}: admitted"),
            Err(kube::Error::Api(status)) => ensure!(
                status.message.contains(says),
                "{attack}: the denial does not say {says:?}: {}",
                status.message
            ),
            Err(e) => bail!("{attack}: {e}"),
        }
    }
    ensure!(host.is_running(), "the host died");
    Ok(())
}

async fn the_webhooks_run_under_the_generated_least_privilege_role(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    // deploy/'s CRD (both versions) and its guest name: the roles are what
    // `wasmop rbac` prints for that module. Under a group of this test's
    // own: its host points the CRD's conversion at itself, which would
    // leave the other tests' Caches (`apps.example.com`) unreadable once it
    // stops.
    const GROUP: &str = "least.example.com";
    let client = env.client();
    install_crd(&client, serde_json::from_value(cache_crd(GROUP)?)?).await?;
    let ns = env.create_namespace("least").await?;
    put_module(
        &client,
        &ns,
        "module",
        "module.wasm",
        &std::fs::read(guest_module("cache-operator")?)?,
    )
    .await?;
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([Entry::config_map("cache-operator", "module")
            .namespaces([&ns])
            .with("settings", json!({"apiGroup": GROUP, "version": "v1beta1"}))])
        .yaml(),
    )
    .await?;
    let settings = env.temp_dir().join("least-settings.yaml");
    std::fs::write(&settings, format!("apiGroup: {GROUP}\nversion: v1beta1\n"))?;
    let (_, kubeconfig) = support::least_privilege_with(
        &env,
        "webhooks",
        &ns,
        &["cache-operator"],
        &[
            "--webhook-cert-secret",
            "webhook-tls",
            "--settings",
            &format!("cache-operator={}", settings.display()),
        ],
    )
    .await?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &[
            "--guests-configmap",
            &format!("{ns}/{LIST}"),
            "--webhook-host",
            "127.0.0.1",
            "--webhook-bind-address",
            "127.0.0.1:0",
            "--webhook-cert-secret",
            &format!("{ns}/webhook-tls"),
        ],
    )?;
    host.wait_for_log("serving webhooks on", LONG).await?;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    wait_for(LONG, || async {
        match validating.get_opt("wasmop-cache-operator").await? {
            Some(_) => Ok(Some(())),
            None => bail!(
                "no wasmop-cache-operator yet; host log tail: {}",
                host_tail(&host)
            ),
        }
    })
    .await?;
    converting_at(&client, GROUP, "cache-operator").await?;
    let bad = cache_yaml(
        GROUP,
        "v1alpha1",
        &ns,
        "untagged",
        &json!({"image": "redis:latest"}),
    );
    let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&bad))?;
    ensure!(
        !ok && stderr.contains("latest"),
        "an image tagged latest was admitted: {stderr}"
    );
    let good = cache_yaml(
        GROUP,
        "v1alpha1",
        &ns,
        "good",
        &json!({"image": "redis:7.2"}),
    );
    let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&good))?;
    ensure!(ok, "{stderr}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    wait_for(LONG, || async {
        match deployments.get_opt("good").await? {
            Some(_) => Ok(Some(())),
            None => bail!("no Deployment good yet"),
        }
    })
    .await?;
    ensure!(
        !host.log().contains("forbidden") && !host.log().contains("Forbidden"),
        "the host was refused something: {}",
        host_tail(&host)
    );
    Ok(())
}

/// The cache-operator of `lang` (a 12–18 MB component for TypeScript and
/// Python, given as a file: a ConfigMap holds at most 1 MiB) on the shipped
/// two-version CRD under a group of its own, `v1beta1` stored: `kubectl
/// apply` of a `v1alpha1` Cache is refused for an untagged image and a
/// directive the guest does not know, and defaulted otherwise; the stored
/// `v1beta1` object is converted by the guest both ways and reconciled in
/// `v1beta1` until Ready; a `v1beta1` Cache reads back as `v1alpha1`.
async fn a_cache_is_admitted_converted_and_reconciled_on_the_shipped_crd(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let group = format!("shipped-{}.example.com", lang.suffix());
    let group = group.as_str();
    let client = env.client();
    install_two_versions(&client, group).await?;
    let ns = env
        .create_namespace(&format!("shipped-{}", lang.suffix()))
        .await?;
    let guest = guest_of(group);
    let settings = env.temp_dir().join(format!("{guest}-settings.yaml"));
    std::fs::write(&settings, format!("apiGroup: {group}\nversion: v1beta1\n"))?;
    let (_, kubeconfig) = admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let cache_dir = compiled_modules(&env, lang).await?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &[
            "--guest",
            &format!("{guest}={}", guest_module(lang.module())?.display()),
            "--settings",
            &format!("{guest}={}", settings.display()),
            "--namespace",
            &ns,
            "--cache-dir",
            cache_dir.to_str().context("utf-8")?,
            "--webhook-host",
            "127.0.0.1",
            "--webhook-bind-address",
            "127.0.0.1:0",
        ],
    )?;
    host.wait_for_log("serving webhooks on", LONG).await?;
    configured(&client, group).await?;
    converting(&client, group).await?;

    for (name, spec, says) in [
        ("untagged", json!({"image": "redis"}), "has no tag"),
        (
            "unknown",
            json!({"image": "redis:7.2", "config": {"no-such-directive": "1"}}),
            "\"no-such-directive\"",
        ),
    ] {
        let yaml = cache_yaml(group, "v1alpha1", &ns, name, &spec);
        let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&yaml))?;
        ensure!(
            !ok && stderr.contains("denied the request") && stderr.contains(says),
            "{name}: not the guest's denial: {stderr}"
        );
    }
    let good = cache_yaml(
        group,
        "v1alpha1",
        &ns,
        "good",
        &json!({"image": "redis:7.2", "replicas": 1, "port": 7000, "config": {"maxmemory": "64mb"}}),
    );
    let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&good))?;
    ensure!(ok, "kubectl apply of a valid Cache failed: {stderr}");
    // Stored as v1beta1 (converted by the guest), reconciled in v1beta1.
    let beta = caches_in(&client, group, "v1beta1", &ns);
    let ready = wait_for(LONG, || async {
        let c = beta.get("good").await?;
        let done = c.data["status"]["phase"] == "Ready"
            && c.data["status"]["observedGeneration"].as_i64() == c.metadata.generation;
        if done {
            Ok(Some(c))
        } else {
            bail!("status {}", c.data["status"])
        }
    })
    .await
    .with_context(|| host_tail(&host))?;
    ensure!(
        ready.data["spec"]["ports"] == json!({"client": 7000})
            && ready.data["spec"]["config"]
                == json!([{"name": "maxmemory", "value": "64mb"},
                    {"name": "maxmemory-policy", "value": "allkeys-lru"}]),
        "the defaulted Cache read as v1beta1: {}",
        ready.data["spec"]
    );
    let deployment: Deployment = Api::namespaced(client.clone(), &ns).get("good").await?;
    let port = deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.ports)
        .and_then(|p| p.into_iter().next())
        .map(|p| p.container_port);
    ensure!(port == Some(7000), "the Deployment's port is {port:?}");
    // A v1beta1 Cache reads back as v1alpha1, defaulted in its own shape.
    let new_spec = json!({"image": "redis:7.4", "ports": {"client": 6380},
        "config": [{"name": "maxmemory", "value": "32mb"}]});
    beta.create(
        &PostParams::default(),
        &serde_json::from_str(&cache_yaml(group, "v1beta1", &ns, "new", &new_spec))?,
    )
    .await?;
    let alpha = caches_in(&client, group, "v1alpha1", &ns)
        .get("new")
        .await?;
    ensure!(
        alpha.data["spec"]["port"] == 6380
            && alpha.data["spec"]["config"]
                == json!({"maxmemory": "32mb", "maxmemory-policy": "allkeys-lru"}),
        "a v1beta1 Cache read as v1alpha1: {}",
        alpha.data["spec"]
    );
    ensure!(host.is_running(), "the host died");
    Ok(())
}

fn host_tail(host: &HostProcess) -> String {
    let log = host.log();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

async fn a_guest_whose_crd_converts_is_refused_without_webhooks_with_the_flag_named(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    const GROUP: &str = "refused.example.com";
    let client = env.client();
    install_two_versions(&client, GROUP).await?;
    let settings = env.temp_dir().join("refused-settings.yaml");
    std::fs::write(&settings, format!("apiGroup: {GROUP}\n"))?;
    let (_, kubeconfig) = admin_identity(&env, "wasmop-refused").await?;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .arg("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--guest")
        .arg(format!(
            "cache={}",
            guest_module("cache-operator")?.display()
        ))
        .arg("--settings")
        .arg(format!("cache={}", settings.display()))
        .args([
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        ])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let error: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    ensure!(!out.status.success(), "the host ran: {stderr}");
    ensure!(
        error.len() == 1 && error[0].contains("converts") && error[0].contains("--webhook-host"),
        "not one line naming --webhook-host: {stderr}"
    );
    Ok(())
}

/// The tests of this module.
///
/// Two of them serve the hostile guest's webhooks: their host points the
/// guest's cluster-wide CRD at itself (its conversion), which every other
/// test's host of the hostile guest would find so, and one writes the
/// webhook configurations `wasmop-hostile`, which monitoring's tests write
/// too; they run alone.
pub fn tests() -> Vec<Test> {
    let mut tests = Vec::new();
    for lang in Lang::ALL {
        tests.extend(
            per_language![lang; a_cache_is_admitted_converted_and_reconciled_on_the_shipped_crd]
                .into_iter()
                .map(|test| test.with_timeout(Duration::from_secs(300))),
        );
    }
    tests.extend(wasmop_testenv::tests![
        a_guest_whose_crd_converts_is_refused_without_webhooks_with_the_flag_named,
        kubectl_apply_is_defaulted_and_refused_by_the_guest => Duration::from_secs(240),
        objects_read_back_in_both_versions_unchanged_in_meaning => Duration::from_secs(240),
        #[alone] a_swap_changes_verdicts_and_a_looping_admit_obeys_its_policy => Duration::from_secs(300),
        the_webhooks_run_under_the_generated_least_privilege_role => Duration::from_secs(240),
        #[alone] hostile_verdicts_are_refused_before_the_api_server_sees_them => Duration::from_secs(240),
    ]);
    tests
}
