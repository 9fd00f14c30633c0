//! End to end on the real control plane: guests that see more than their
//! children. Related objects reach exactly the parents they map to, a
//! change reconciles exactly those parents, Secrets reach a guest concealed
//! unless its list entry says `secretValues: true`, settings choose what a
//! module reconciles and bad settings keep the running version.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use sha2::Digest as _;
use wasmop_testenv::TestEnv;
use wasmop_testenv::Window;
use wasmop_testenv::harness::Test;

use crate::support;
use crate::support::guests::{Entry, GuestList};
use crate::support::hostile::HostileHost;
use crate::support::{
    HostProcess, at, caches, dyn_api, events_about, guest_module, install_cache_crd, install_yaml,
    put_guest_list, wait_for, workspace,
};

const LONG: Duration = Duration::from_secs(90);
const PASSWORD: &str = "s3cr3t-value";
const ROTATED: &str = "r0tated-value";

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn secret(name: &str, key: &str, value: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some([(key.to_owned(), ByteString(value.as_bytes().to_vec()))].into()),
        ..Secret::default()
    }
}

async fn put_secret(client: &Client, ns: &str, s: &Secret) -> anyhow::Result<()> {
    Api::<Secret>::namespaced(client.clone(), ns)
        .patch(
            &s.name_any(),
            &PatchParams::apply("wasmop-tests").force(),
            &Patch::Apply(s),
        )
        .await?;
    Ok(())
}

/// The Cache `name`'s `Available` condition, once it has one.
async fn available(client: &Client, ns: &str, name: &str) -> anyhow::Result<Option<Value>> {
    let cache = caches(client, ns).get(name).await?;
    Ok(at(&cache, "/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .cloned())
}

async fn wait_secret_missing(client: &Client, ns: &str, name: &str) -> anyhow::Result<Value> {
    wait_for(LONG, || async {
        let cache = caches(client, ns).get(name).await?;
        let condition = available(client, ns, name).await?;
        Ok(condition
            .filter(|c| c["status"] == "False" && c["reason"] == "SecretMissing")
            .filter(|_| at(&cache, "/status/phase") == Some(&json!("Pending"))))
    })
    .await
    .with_context(|| format!("Cache {name} never reported SecretMissing"))
}

/// The pod-template annotation of the Deployment `name` holding the hash of
/// the password's value.
async fn secret_hash(client: &Client, ns: &str, name: &str) -> anyhow::Result<Option<String>> {
    let Some(d) = Api::<Deployment>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?
    else {
        return Ok(None);
    };
    Ok(d.spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .and_then(|a| a.get("apps.example.com/secret-hash").cloned()))
}

/// Fails when `text` carries a Secret value, plain or base64.
fn holds_no_value(what: &str, text: &str) -> anyhow::Result<()> {
    for value in [PASSWORD, ROTATED] {
        ensure!(
            !text.contains(value) && !text.contains(&b64(value)),
            "{what} carries a Secret value"
        );
    }
    Ok(())
}

async fn a_cache_waits_for_its_secret_and_rolls_when_it_rotates(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env.create_namespace("auth").await?;
    let (user, kubeconfig) = support::least_privilege(&env, &ns, &ns, &["cache-operator"]).await?;
    let module = support::guest_arg("cache-operator")?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &["--guest", &module, "--namespace", &ns],
    )?;
    let cache = serde_json::from_value(json!({
        "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
        "metadata": {"name": "auth"},
        "spec": {"image": "redis:7.2", "auth": {"secretRef": {"name": "creds", "key": "password"}}},
    }))?;
    caches(&client, &ns)
        .create(&PostParams::default(), &cache)
        .await?;

    let missing = wait_secret_missing(&client, &ns, "auth").await?;
    let message = missing["message"].as_str().unwrap_or_default();
    ensure!(
        message.contains("creds") && message.contains("password"),
        "the message names neither the Secret nor the key: {message:?}"
    );
    ensure!(
        secret_hash(&client, &ns, "auth").await?.is_none()
            && Api::<Deployment>::namespaced(client.clone(), &ns)
                .get_opt("auth")
                .await?
                .is_none(),
        "a Deployment was created without its Secret"
    );

    // A Secret without the key is still missing, and says which key.
    put_secret(&client, &ns, &secret("creds", "user", PASSWORD)).await?;
    wait_for(LONG, || async {
        let c = available(&client, &ns, "auth").await?;
        Ok(c.filter(|c| {
            c["message"]
                .as_str()
                .is_some_and(|m| m.contains("has no key password"))
        })
        .map(|_| ()))
    })
    .await
    .context("a Secret without the key was not reported")?;

    let created = Instant::now();
    Api::<Secret>::namespaced(client.clone(), &ns)
        .delete("creds", &DeleteParams::default())
        .await?;
    put_secret(&client, &ns, &secret("creds", "password", PASSWORD)).await?;
    support::wait_ready(&client, &ns, "auth").await?;
    let converged = created.elapsed();
    let first = secret_hash(&client, &ns, "auth")
        .await?
        .context("the Deployment has no secret-hash annotation")?;
    let deployment = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get("auth")
        .await?;
    let env_var = serde_json::to_value(&deployment)?
        .pointer("/spec/template/spec/containers/0/env/0")
        .cloned()
        .unwrap_or_default();
    ensure!(
        env_var
            == json!({"name": "CACHE_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}),
        "the password does not reach the pods from the Secret: {env_var}"
    );
    eprintln!("related: Cache Ready {converged:.1?} after its Secret was created");

    put_secret(&client, &ns, &secret("creds", "password", ROTATED)).await?;
    let second = wait_for(LONG, || async {
        Ok(secret_hash(&client, &ns, "auth")
            .await?
            .filter(|h| *h != first))
    })
    .await
    .context("rotating the Secret did not change the pod-template hash")?;

    Api::<Secret>::namespaced(client.clone(), &ns)
        .delete("creds", &DeleteParams::default())
        .await?;
    wait_secret_missing(&client, &ns, "auth").await?;
    let mut window = Window::new(Duration::from_secs(2));
    while window.next().await {
        ensure!(
            secret_hash(&client, &ns, "auth").await?.as_deref() == Some(second.as_str()),
            "the Deployment changed while its Secret was missing"
        );
    }

    // Nobody but the host wrote the Cache after the test created it: the
    // Secret's arrival alone made it converge.
    let foreign: Vec<_> = env
        .audit_events()?
        .into_iter()
        .filter(|e| e["objectRef"]["resource"] == "caches" && e["objectRef"]["name"] == "auth")
        .filter(|e| e["objectRef"]["namespace"] == ns.as_str())
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete")
            )
        })
        .filter(|e| {
            e["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|c| c < 300)
        })
        .filter(|e| e["user"]["username"] != user.as_str())
        .map(|e| e["verb"].as_str().unwrap_or_default().to_owned())
        .collect();
    ensure!(foreign == ["create"], "others wrote the Cache: {foreign:?}");

    let events: Vec<String> = events_about(&client, &ns, "auth")
        .await?
        .into_iter()
        .map(|(_, reason, note)| format!("{reason}: {note}"))
        .collect();
    ensure!(
        events.iter().any(|e| e.starts_with("SecretMissing: ")),
        "no SecretMissing event: {events:?}"
    );
    holds_no_value("an event", &events.join("\n"))?;
    holds_no_value("the host log", &host.log())?;
    ensure!(host.is_running(), "the host died");
    Ok(())
}

/// The hostile guest with related ConfigMaps selected by `spec.selector`:
/// a change of one ConfigMap reconciles the parents that select it, and no
/// other.
async fn a_shared_config_map_reconciles_exactly_the_parents_it_maps_to(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    const SHARING: usize = 50;
    const OTHERS: usize = 10;
    let settings = env.temp_dir().join("shared-settings.yaml");
    // The ConfigMaps are watched and handed over as metadata only.
    std::fs::write(&settings, "related: true\nmetadataOnly: true\n")?;
    let HostileHost {
        client,
        ns,
        mut host,
        ..
    } = HostileHost::build(&env, "shared")
        .admin()
        .args([
            "--settings".to_owned(),
            format!("hostile={}", settings.display()),
        ])
        .start()
        .await?;
    let shared = ConfigMap {
        metadata: ObjectMeta {
            name: Some("shared".into()),
            labels: Some([("team".to_owned(), "blue".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("setting".to_owned(), "one".to_owned())].into()),
        ..ConfigMap::default()
    };
    let configs = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    configs.create(&PostParams::default(), &shared).await?;
    let hostiles = support::hostiles(&client, &ns);
    let names = |team: &str, n: usize| {
        (0..n)
            .map(move |i| format!("{team}-{i}"))
            .collect::<Vec<_>>()
    };
    for (team, n) in [("blue", SHARING), ("red", OTHERS)] {
        for name in names(team, n) {
            let obj = serde_json::from_value(json!({
                "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
                "metadata": {"name": name},
                "spec": {"attack": "echo-related", "selector": {"team": team}},
            }))?;
            hostiles.create(&PostParams::default(), &obj).await?;
        }
    }
    // Every parent got what maps to it: the shared ConfigMap for blue, none
    // for red.
    let seen_version = |obj: &DynamicObject| {
        at(obj, "/status/related")
            .and_then(Value::as_array)
            .map(|related| {
                related
                    .iter()
                    .filter(|o| o["kind"] == "ConfigMap")
                    .map(|o| {
                        o["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned()
                    })
                    .collect::<Vec<_>>()
            })
    };
    let first_version = configs
        .get("shared")
        .await?
        .resource_version()
        .unwrap_or_default();
    wait_for(LONG, || async {
        let list = hostiles.list(&Default::default()).await?;
        let done = list.items.iter().all(|h| match seen_version(h) {
            Some(v) if h.name_any().starts_with("blue") => v == [first_version.clone()],
            Some(v) => v.is_empty(),
            None => false,
        });
        Ok(done.then_some(()))
    })
    .await
    .context("not every parent saw what maps to it")?;
    let sample = hostiles.get("blue-0").await?;
    let copy = at(&sample, "/status/related/0")
        .cloned()
        .unwrap_or_default();
    ensure!(
        copy["kind"] == "ConfigMap"
            && copy["metadata"]["name"] == "shared"
            && copy.get("data").is_none(),
        "a metadata-only related object came with more than its metadata: {copy}"
    );
    let quiet = || async {
        let mut last = count_starts(&host.log());
        loop {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let now = count_starts(&host.log());
            if now == last {
                return now;
            }
            last = now;
        }
    };
    let before = quiet().await;

    configs
        .patch(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"setting": "two"}})),
        )
        .await?;
    let second_version = configs
        .get("shared")
        .await?
        .resource_version()
        .unwrap_or_default();
    wait_for(LONG, || async {
        let list = hostiles.list(&Default::default()).await?;
        let done = list
            .items
            .iter()
            .filter(|h| h.name_any().starts_with("blue"))
            .all(|h| seen_version(h) == Some(vec![second_version.clone()]));
        Ok(done.then_some(()))
    })
    .await
    .context("a parent that selects the ConfigMap did not see its change")?;
    let after = quiet().await;
    let mut delta: BTreeMap<String, usize> = BTreeMap::new();
    for (object, n) in &after {
        let was = before.get(object).copied().unwrap_or(0);
        if *n > was {
            delta.insert(object.clone(), n - was);
        }
    }
    let mut blue: Vec<String> = names("blue", SHARING)
        .into_iter()
        .map(|n| format!("{ns}/{n}"))
        .collect();
    blue.sort();
    ensure!(
        delta.keys().cloned().collect::<Vec<_>>() == blue,
        "reconciled {} parents instead of the {SHARING} sharing the ConfigMap: {delta:?}",
        delta.len()
    );
    ensure!(
        delta.values().all(|n| *n == 1),
        "a sharing parent was reconciled more than once: {delta:?}"
    );
    eprintln!(
        "related: one ConfigMap change reconciled {} of {} parents, each once",
        delta.len(),
        SHARING + OTHERS
    );
    ensure!(host.is_running(), "the host died");
    Ok(())
}

/// "reconcile started" lines of the host log, per object.
fn count_starts(log: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in log.lines().filter(|l| l.ends_with("reconcile started")) {
        if let Some(object) = line
            .split(" object=")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
        {
            *counts.entry(object.to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

/// One module, two guest names, two kinds and two settings: `hidden`
/// reconciles Hostiles and gets Secrets concealed, `shown` reconciles
/// HostileTwins with `secretValues: true` and gets the values. New settings
/// the guest refuses keep the running version.
async fn secret_values_reach_only_a_guest_whose_entry_asks_for_them(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let ns = env.create_namespace("values").await?;
    // The host's own namespace (the list's) is never related: the parents
    // and their Secret live in another.
    let lns = env.create_namespace("values-host").await?;
    support::put_hostile_module(&client, &lns).await?;
    let entry = |name: &str, settings: Value, values: bool| {
        Entry::config_map(name, "hostile-module")
            .namespaces([&ns])
            .with("settings", settings)
            .with("secretValues", values)
    };
    let list = |shown_settings: Value| {
        GuestList::of([
            entry("hidden", json!({"related": true}), false),
            entry("shown", shown_settings, true),
        ])
        .yaml()
    };
    put_guest_list(
        &client,
        &lns,
        "wasmop-guests",
        &list(json!({"related": true, "primary": "HostileTwin"})),
    )
    .await?;
    put_secret(&client, &ns, &secret("creds", "password", PASSWORD)).await?;
    let (_, kubeconfig) = support::admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &["--guests-configmap", &format!("{lns}/wasmop-guests")],
    )?;
    let hostiles = support::hostiles(&client, &ns);
    let twins = dyn_api(
        &client,
        "test.wasmop.dev",
        "v1alpha1",
        "HostileTwin",
        "hostiletwins",
        &ns,
    );
    for (api, kind, name) in [(&hostiles, "Hostile", "h"), (&twins, "HostileTwin", "t")] {
        let obj = serde_json::from_value(json!({
            "apiVersion": "test.wasmop.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name},
            "spec": {"attack": "echo-related", "target": "creds"},
        }))?;
        api.create(&PostParams::default(), &obj).await?;
    }
    let echoed = |api: Api<DynamicObject>, name: &'static str| async move {
        wait_for(LONG, || async {
            let obj = api.get(name).await?;
            Ok(at(&obj, "/status/related/0/data/password")
                .and_then(Value::as_str)
                .map(str::to_owned))
        })
        .await
        .with_context(|| format!("{name} never echoed the Secret"))
    };
    let concealed = echoed(hostiles.clone(), "h").await?;
    let digest = format!(
        "sha256:{}",
        hex::encode(sha2::Sha256::digest(PASSWORD.as_bytes()))
    );
    ensure!(
        concealed == b64(&digest),
        "the guest without secretValues got {concealed:?}, not the value's SHA-256"
    );
    let shown = echoed(twins.clone(), "t").await?;
    ensure!(
        shown == b64(PASSWORD),
        "the guest with secretValues got {shown:?}"
    );
    // The concealed Secret keeps what the guest may see: its keys, name
    // and type, and no last-applied copy of the data.
    let related = hostiles.get("h").await?;
    let copy = at(&related, "/status/related/0")
        .cloned()
        .unwrap_or_default();
    ensure!(copy["metadata"]["name"] == "creds", "{copy}");
    ensure!(
        copy["metadata"]["annotations"]
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_none(),
        "{copy}"
    );
    ensure!(
        copy["metadata"].get("managedFields").is_none(),
        "managedFields reached the guest: {copy}"
    );

    // New settings the guest refuses: the running version keeps serving
    // HostileTwins.
    put_guest_list(
        &client,
        &lns,
        "wasmop-guests",
        &list(json!({"related": true, "primary": "HostileTwin", "describe": "refuse-settings"})),
    )
    .await?;
    let note =
        support::wait_for_event(&client, &lns, "wasmop-guests", "InvalidSettings", LONG).await?;
    ensure!(
        note.contains("\"shown\"") && note.contains("refused on purpose"),
        "{note}"
    );
    let obj = serde_json::from_value(json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "HostileTwin",
        "metadata": {"name": "t2"},
        "spec": {"attack": "echo-related", "target": "creds"},
    }))?;
    twins.create(&PostParams::default(), &obj).await?;
    let still = echoed(twins.clone(), "t2").await?;
    ensure!(
        still == b64(PASSWORD),
        "the running version stopped serving: {still:?}"
    );

    let events = events_about(&client, &lns, "wasmop-guests").await?;
    holds_no_value("an event", &format!("{events:?}"))?;
    holds_no_value("the host log", &host.log())?;
    ensure!(host.is_running(), "the host died");
    Ok(())
}

/// `wasmop rbac` for the cache-operator (which relates the Secret a Cache
/// names) reads Secrets and nothing more, under a comment naming the guest.
async fn rbac_reads_related_secrets_only_under_a_comment(_env: Arc<TestEnv>) -> anyhow::Result<()> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["rbac", "--guest"])
        .arg(guest_module("cache-operator")?)
        .output()?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    let lines: Vec<&str> = text.lines().collect();
    let Some(at) = lines
        .iter()
        .position(|l| l.trim() == "resources: [secrets]")
    else {
        bail!("no Secret rule:\n{text}");
    };
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)?;
    let secret_rules: Vec<&Value> = docs
        .iter()
        .filter_map(|d| d["rules"].as_array())
        .flatten()
        .filter(|r| {
            r["resources"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r == "secrets"))
        })
        .collect();
    ensure!(secret_rules.len() == 1, "{secret_rules:?}");
    let rule = secret_rules[0];
    ensure!(
        rule["resources"] == json!(["secrets"]) && rule["verbs"] == json!(["get", "list", "watch"]),
        "the Secret rule is not exactly get/list/watch: {rule}"
    );
    // The rule's first line is `- apiGroups: [""]`, the comment just above.
    let comment = at.checked_sub(2).map(|i| lines[i]);
    ensure!(
        comment.is_some_and(|c| c.contains("Secrets") && c.contains("cache-operator")),
        "no comment naming the guest above the Secret rule:\n{text}"
    );
    Ok(())
}

/// A parent that relates more objects than its guest's bounds
/// (`maxRelatedObjects`, here `--max-related-objects 5`) fails with
/// `RelatedTooLarge` naming the kind, without the guest being called; a
/// parent within the bounds is served.
async fn related_objects_past_the_bounds_fail_the_parent_naming_the_kind(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let ns = env.create_namespace("bounded").await?;
    let settings = env.temp_dir().join("bounded-settings.yaml");
    std::fs::write(&settings, "related: true\n")?;
    let (_, kubeconfig) = support::admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let module = support::guest_arg("hostile")?;
    let settings_arg = format!("hostile={}", settings.display());
    let _host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &[
            "--guest",
            &module,
            "--settings",
            &settings_arg,
            "--namespace",
            &ns,
            "--max-related-objects",
            "5",
        ],
    )?;
    let configs = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    for (team, n) in [("flood", 6), ("few", 2)] {
        for i in 0..n {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(format!("{team}-{i}")),
                    labels: Some([("team".to_owned(), team.to_owned())].into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            configs.create(&PostParams::default(), &cm).await?;
        }
    }
    let hostiles = support::hostiles(&client, &ns);
    for team in ["flood", "few"] {
        let obj = serde_json::from_value(json!({
            "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
            "metadata": {"name": team},
            "spec": {"attack": "echo-related", "selector": {"team": team}},
        }))?;
        hostiles.create(&PostParams::default(), &obj).await?;
    }
    let note = support::wait_for_event(&client, &ns, "flood", "RelatedTooLarge", LONG).await?;
    ensure!(
        note.contains("v1/ConfigMap") && note.contains("maxRelatedObjects 5"),
        "the failure does not name the kind and the bound: {note}"
    );
    ensure!(
        at(&hostiles.get("flood").await?, "/status/related").is_none(),
        "the guest was called for a parent past the bounds"
    );
    wait_for(LONG, || async {
        let few = hostiles.get("few").await?;
        Ok(at(&few, "/status/related")
            .and_then(Value::as_array)
            .filter(|r| r.iter().filter(|o| o["kind"] == "ConfigMap").count() == 2)
            .map(|_| ()))
    })
    .await
    .context("a parent within the bounds was not served")
}

/// Nothing in the host's own namespace (the guest list's, where its pull
/// and certificate Secrets live) reaches a guest as a related object, even
/// for a parent there that names it; the same name elsewhere does.
async fn nothing_in_the_hosts_namespace_is_related(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let client = env.client();
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let lns = env.create_namespace("own-host").await?;
    let ns = env.create_namespace("own-tenant").await?;
    support::put_hostile_module(&client, &lns).await?;
    put_guest_list(
        &client,
        &lns,
        "wasmop-guests",
        &GuestList::of([Entry::config_map("hostile", "hostile-module")
            .namespaces([&lns, &ns])
            .with("settings", json!({"related": true}))])
        .yaml(),
    )
    .await?;
    for namespace in [&lns, &ns] {
        put_secret(&client, namespace, &secret("creds", "password", PASSWORD)).await?;
    }
    let _host = HostProcess::follow_list(&env, &lns, "wasmop-guests").await?;
    let probe = serde_json::from_value(json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
        "metadata": {"name": "probe"},
        "spec": {"attack": "echo-related", "target": "creds"},
    }))?;
    for namespace in [&lns, &ns] {
        support::hostiles(&client, namespace)
            .create(&PostParams::default(), &probe)
            .await?;
    }
    let related = |namespace: String| {
        let client = client.clone();
        async move {
            wait_for(LONG, || async {
                let obj = support::hostiles(&client, &namespace).get("probe").await?;
                Ok(at(&obj, "/status/related")
                    .and_then(Value::as_array)
                    .map(|r| r.len()))
            })
            .await
            .with_context(|| format!("the probe in {namespace} was not reconciled"))
        }
    };
    ensure!(
        related(ns.clone()).await? == 1,
        "the tenant's Secret did not reach the guest"
    );
    let own = related(lns.clone()).await?;
    ensure!(
        own == 0,
        "{own} objects of the host's own namespace reached the guest"
    );
    Ok(())
}

/// The tests of this module.
pub fn tests() -> Vec<Test> {
    let long = Duration::from_secs(240);
    wasmop_testenv::tests![
        a_cache_waits_for_its_secret_and_rolls_when_it_rotates => long,
        a_shared_config_map_reconciles_exactly_the_parents_it_maps_to => long,
        secret_values_reach_only_a_guest_whose_entry_asks_for_them => long,
        related_objects_past_the_bounds_fail_the_parent_naming_the_kind => long,
        nothing_in_the_hosts_namespace_is_related => long,
        rbac_reads_related_secrets_only_under_a_comment,
    ]
}
