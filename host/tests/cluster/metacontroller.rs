//! End to end on the real control plane: Metacontroller's controllers on
//! wasmop, their definitions and hooks unchanged. Each controller of
//! `guests/metacontroller/` is built as a user builds it (`wasmop
//! metacontroller build` against the cluster its CRD is installed in), run
//! by a host, and driven by its own `test.sh` in the form of Metacontroller's
//! examples' (apply, wait on the cluster's state, change, wait, delete).
//! The hostile hooks (`guests/hostile/metacontroller`) are answered as the
//! host answers any guest's bad answer: the reconcile fails with the hook's
//! words, nothing is written.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use wasmop_host::model::Request;
use wasmop_host::runtime::{Limits, ModuleBytes, Runtime, RuntimeConfig};
use wasmop_testenv::TestEnv;
use wasmop_testenv::harness::Test;

use crate::support::{
    HostProcess, admin_identity, at, dyn_api, install_yaml, tail, wait_for, workspace,
};

/// The folder of a controller of `guests/metacontroller`.
fn controller_dir(name: &str) -> PathBuf {
    workspace().join("guests/metacontroller").join(name)
}

/// `wasmop metacontroller build <definition> [<more>…] --hooks <hooks> -o
/// <out>` with `kubeconfig` (where the CRD is resolved): whether it
/// succeeded, and what it printed.
fn try_build(
    definition: &Path,
    more: &[&str],
    hooks: &Path,
    kubeconfig: &Path,
    out: &Path,
) -> anyhow::Result<(bool, String)> {
    let output = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["metacontroller", "build"])
        .arg(definition)
        .args(more)
        .arg("--hooks")
        .arg(hooks)
        .arg("-o")
        .arg(out)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .context("running wasmop metacontroller build")?;
    Ok((
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

/// `wasmop metacontroller build <dir>/controller.yaml --hooks <dir>/<hooks>`
/// into the env's temp dir as `out`.
fn build_hooks(
    env: &TestEnv,
    dir: &Path,
    hooks: &str,
    kubeconfig: &Path,
    out: &str,
) -> anyhow::Result<PathBuf> {
    build_definition(
        env,
        &dir.join("controller.yaml"),
        &dir.join(hooks),
        kubeconfig,
        out,
    )
}

/// `wasmop metacontroller build <definition> --hooks <hooks>` into the
/// env's temp dir as `out`, which must succeed.
fn build_definition(
    env: &TestEnv,
    definition: &Path,
    hooks: &Path,
    kubeconfig: &Path,
    out: &str,
) -> anyhow::Result<PathBuf> {
    let module = env.temp_dir().join(out);
    let (ok, said) = try_build(definition, &[], hooks, kubeconfig, &module)?;
    if !ok {
        bail!(
            "wasmop metacontroller build {} failed: {said}",
            definition.display()
        );
    }
    Ok(module)
}

fn build(env: &TestEnv, dir: &Path, kubeconfig: &Path, out: &str) -> anyhow::Result<PathBuf> {
    build_hooks(env, dir, "hooks", kubeconfig, out)
}

/// Where a controller's host watches.
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    /// The test's own namespace.
    Namespace,
    /// Every namespace (a cluster-scoped parent).
    Cluster,
}

/// Installs the controller's CRD (if it has one), builds it with the hook
/// files of `hooks`, runs it in a host of its own namespace (or of every
/// one) and runs its `test.sh` there.
async fn run_example(env: Arc<TestEnv>, name: &str, hooks: &str) -> anyhow::Result<()> {
    run_example_in(env, name, hooks, Scope::Namespace).await
}

async fn run_example_in(
    env: Arc<TestEnv>,
    name: &str,
    hooks: &str,
    scope: Scope,
) -> anyhow::Result<()> {
    let dir = controller_dir(name);
    if dir.join("crd.yaml").is_file() {
        install_yaml(&env.client(), &dir.join("crd.yaml")).await?;
    }
    let ns = env.create_namespace(&format!("mc-{name}")).await?;
    let (_, kubeconfig) = admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let module = build_hooks(&env, &dir, hooks, &kubeconfig, &format!("{ns}.wasm"))?;
    let guest = format!("{name}={}", module.display());
    let mut args = vec!["--guest", &guest];
    if scope == Scope::Namespace {
        args.extend(["--namespace", &ns]);
    }
    let mut host = HostProcess::start(&env, &kubeconfig, &ns, &args)?;
    let script = dir.join("test.sh");
    let test = tokio::task::spawn_blocking({
        let kubeconfig = kubeconfig.clone();
        let ns = ns.clone();
        move || {
            Command::new("bash")
                .arg(&script)
                .env("KUBECONFIG", &kubeconfig)
                .env("NS", &ns)
                .output()
        }
    })
    .await??;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
    if !test.status.success() {
        bail!(
            "{name}/test.sh failed:\n{said}\n--- host log:\n{}",
            tail(&host.log(), 60)
        );
    }
    host.stop();
    anyhow::ensure!(
        said.contains("PASS"),
        "{name}/test.sh ended without PASS:\n{said}"
    );
    Ok(())
}

async fn a_javascript_statefulset_like_controller_rolls_one_pod_at_a_time_and_finalizes(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    run_example(env, "petset", "hooks").await
}

/// The same controller with its hook in Python (`hooks-py/sync.py`, the
/// logic of `hooks/sync.js`) passes the same `test.sh`.
async fn the_statefulset_like_controller_with_its_python_hook_passes_the_same_test(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    run_example(env, "petset", "hooks-py").await
}

async fn a_python_controller_with_generate_selector_updates_in_place_and_reports_a_raising_hook(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    run_example(env, "fanout", "hooks").await
}

/// A cluster-scoped ConfigPropagation copies a ConfigMap its customize
/// hook relates (in a namespace of its own) into target namespaces:
/// namespaced children of a cluster-scoped parent, a related object's
/// change followed, `parentResource.labelSelector` honoured.
async fn a_python_controller_with_a_customize_hook_propagates_across_namespaces(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    run_example_in(env, "propagation", "hooks", Scope::Cluster).await
}

/// A DecoratorController attaches a Service to each Deployment its label
/// selector takes, and sets a label and an annotation on it.
async fn a_python_decorator_attaches_services_to_the_deployments_it_selects(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    run_example(env, "exposer", "hooks").await
}

/// Without `generateSelector`, a parent's `spec.selector` adopts the
/// orphans it matches, as Metacontroller claims children: the one the hook
/// wants is updated in place, the one it does not is pruned, an orphan the
/// selector does not match and an object another controller owns are left
/// alone. The fanout controller as shipped sets `generateSelector: true`;
/// this test builds it without, which is what it tests.
async fn without_generate_selector_a_parents_selector_adopts_the_orphans_it_matches(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let dir = controller_dir("fanout");
    let client = env.client();
    install_yaml(&client, &dir.join("crd.yaml")).await?;
    let ns = env.create_namespace("mc-adopt").await?;
    let (_, kubeconfig) = admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let definition = env.temp_dir().join(format!("{ns}-controller.yaml"));
    std::fs::write(
        &definition,
        std::fs::read_to_string(dir.join("controller.yaml"))?
            .replace("  generateSelector: true\n", ""),
    )?;
    let module = build_definition(
        &env,
        &definition,
        &dir.join("hooks"),
        &kubeconfig,
        &format!("{ns}.wasm"),
    )?;
    let maps = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    // Another controller's object (a real one: the garbage collector
    // deletes what an absent owner controls).
    let someone = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "someone"}}))?,
        )
        .await?
        .metadata
        .uid
        .context("a uid")?;
    let orphan = |name: &str, owner: &str, controlled: bool| -> anyhow::Result<ConfigMap> {
        let owners = if controlled {
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "someone",
                "uid": someone, "controller": true}])
        } else {
            json!([])
        };
        Ok(serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"mc.example.com/fanout": owner},
                "ownerReferences": owners},
            "data": {"greeting": "old"},
        }))?)
    };
    for (name, owner, controlled) in [
        ("adopt-0", "adopt", false),
        ("adopt-9", "adopt", false),
        ("taken", "adopt", true),
        ("other", "other", false),
    ] {
        maps.create(&PostParams::default(), &orphan(name, owner, controlled)?)
            .await?;
    }
    let guest = format!("fanout={}", module.display());
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &["--guest", &guest, "--namespace", &ns],
    )?;
    let fanouts = dyn_api(&client, "mc.example.com", "v1", "Fanout", "fanouts", &ns);
    let parent: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "mc.example.com/v1", "kind": "Fanout",
        "metadata": {"name": "adopt"},
        "spec": {"copies": 1, "data": {"greeting": "hello"},
            "selector": {"matchLabels": {"mc.example.com/fanout": "adopt"}}},
    }))?;
    let uid = fanouts
        .create(&PostParams::default(), &parent)
        .await?
        .metadata
        .uid
        .context("a uid")?;
    wait_for(Duration::from_secs(90), || async {
        let adopted = maps.get("adopt-0").await?;
        let owned = adopted
            .metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true));
        let updated = adopted
            .data
            .unwrap_or_default()
            .get("greeting")
            .map(String::as_str)
            == Some("hello");
        let pruned = maps.get_opt("adopt-9").await?.is_none();
        Ok((owned && updated && pruned).then_some(()))
    })
    .await
    .with_context(|| tail(&host.log(), 40))?;
    for (name, why) in [
        ("other", "the selector does not match it"),
        ("taken", "another controller owns it"),
    ] {
        let left = maps.get(name).await?;
        ensure!(
            left.data
                .unwrap_or_default()
                .get("greeting")
                .map(String::as_str)
                == Some("old")
                && !left
                    .metadata
                    .owner_references
                    .unwrap_or_default()
                    .iter()
                    .any(|o| o.uid == uid),
            "{name} was adopted or changed, though {why}"
        );
    }
    host.stop();
    Ok(())
}

/// The hostile controller's folder.
fn hostile_dir() -> PathBuf {
    workspace().join("guests/hostile/metacontroller")
}

/// Each attack of the JavaScript hostile hook, the reason the parent's
/// `GuestReconciled` condition must show and words its message must hold.
const JS_ATTACKS: &[(&str, &str, &str)] = &[
    (
        "throw",
        "ReconcileFailed",
        "the sync hook failed: hook sync threw: Error: the hook gave up: boom",
    ),
    (
        "status-500",
        "ReconcileFailed",
        "answered status 500: internal trouble in the hook",
    ),
    (
        "not-json",
        "ReconcileFailed",
        "the sync hook's answer is not JSON",
    ),
    ("no-answer", "ReconcileFailed", "not {status, body}"),
    ("spin", "GuestTimeout", "deadline exceeded"),
    ("never-settles", "GuestTrap", "trapped"),
    ("memory", "GuestMemoryLimit", "memory limit exceeded"),
    ("too-many-children", "InvalidGuestResponse", "500"),
    (
        "undeclared-kind",
        "ReconcileFailed",
        "childResources do not list",
    ),
    ("owner-reference", "InvalidGuestResponse", "ownerReferences"),
    ("other-namespace", "InvalidGuestResponse", "namespace"),
    ("host-label", "InvalidGuestResponse", "wasmop.dev/"),
    (
        "parent-status-not-object",
        "ReconcileFailed",
        "`status` is not an object",
    ),
];

/// The `GuestReconciled` condition of `obj`, as (reason, message).
fn reconciled(obj: &DynamicObject) -> Option<(String, String)> {
    at(obj, "/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "GuestReconciled" && c["status"] == "False")
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or("").to_owned(),
                c["message"].as_str().unwrap_or("").to_owned(),
            )
        })
}

/// Waits until the parent of each of `attacks` (named by `name`) shows a
/// failed `GuestReconciled` condition with the attack's reason and words.
async fn each_fails_as_said(
    parents: &Api<DynamicObject>,
    attacks: &[(&str, &str, &str)],
    name: impl Fn(&str) -> String,
    host: &HostProcess,
) -> anyhow::Result<()> {
    for (attack, reason, words) in attacks {
        let (got_reason, message) = wait_for(Duration::from_secs(90), || async {
            Ok(reconciled(&parents.get(&name(attack)).await?))
        })
        .await
        .with_context(|| {
            format!(
                "{attack}: no failed GuestReconciled condition\n{}",
                tail(&host.log(), 40)
            )
        })?;
        eprintln!("{attack}: {got_reason}: {message}");
        ensure!(
            got_reason == *reason && message.contains(words),
            "{attack}: expected {reason} with {words:?}, got {got_reason}: {message}"
        );
    }
    Ok(())
}

async fn hostile_javascript_hooks_fail_their_parent_in_their_own_words_and_nothing_is_written(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let dir = hostile_dir();
    let client = env.client();
    install_yaml(&client, &dir.join("crd.yaml")).await?;
    let ns = env.create_namespace("mc-hostile").await?;
    let (_, kubeconfig) = admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let module = build(&env, &dir, &kubeconfig, &format!("{ns}.wasm"))?;
    let guest = format!("hostile-hooks={}", module.display());
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &["--guest", &guest, "--namespace", &ns],
    )?;
    let parents = dyn_api(
        &client,
        "mc.example.com",
        "v1",
        "HostileHook",
        "hostilehooks",
        &ns,
    );
    for (attack, _, _) in JS_ATTACKS.iter().chain(&[("none", "", "")]) {
        let parent: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "mc.example.com/v1", "kind": "HostileHook",
            "metadata": {"name": attack}, "spec": {"attack": attack},
        }))?;
        parents.create(&PostParams::default(), &parent).await?;
    }
    // A well-behaved parent beside them is served.
    let served = wait_for(Duration::from_secs(90), || async {
        let fine = parents.get("none").await?;
        Ok((at(&fine, "/status/fine") == Some(&Value::Bool(true))).then_some(()))
    })
    .await;
    if let Err(e) = served {
        bail!(
            "the well-behaved parent was not served: {e}; the host is {}; its log:\n{}",
            host.state(),
            tail(&host.log(), 40)
        );
    }
    each_fails_as_said(&parents, JS_ATTACKS, |attack| attack.to_owned(), &host).await?;
    // Nothing but the well-behaved parent's child was written, here or
    // anywhere the hooks aimed.
    let maps: Vec<String> = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    ensure!(maps == ["none-fine"], "ConfigMaps written: {maps:?}");
    let secrets = Api::<Secret>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?;
    ensure!(secrets.items.is_empty(), "a Secret was written");
    let away = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get_opt("other-namespace-away")
        .await?;
    ensure!(away.is_none(), "a ConfigMap was written in kube-system");
    ensure!(
        host.is_running(),
        "the host died:\n{}",
        tail(&host.log(), 40)
    );
    host.stop();
    Ok(())
}

/// The Python hook server's attacks, called in-process: each fails the
/// reconcile with the hook's own words or the host's limit.
async fn hostile_python_hooks_fail_the_reconcile_in_their_own_words(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let dir = hostile_dir();
    install_yaml(&env.client(), &dir.join("crd.yaml")).await?;
    let (_, kubeconfig) = admin_identity(&env, "wasmop-mc-hostile-py").await?;
    let module = build_hooks(&env, &dir, "hooks-py", &kubeconfig, "mc-hostile-py.wasm")?;
    let bytes = std::fs::read(&module)?;
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let runtime = Runtime::new(RuntimeConfig::default())?;
        let (guest, _) = runtime.load(
            "hostile-py",
            &ModuleBytes::new(bytes),
            Limits::default(),
            None,
        )?;
        let parent = |attack: &str| {
            Request::of(json!({
                "apiVersion": "mc.example.com/v1", "kind": "HostileHook",
                "metadata": {"name": attack, "namespace": "default", "uid": "u-1"},
                "spec": {"attack": attack},
            }))
        };
        let fine = guest.reconcile(&parent("none"))?;
        ensure!(
            fine.status.as_deref() == Some(r#"{"fine":true}"#),
            "{fine:?}"
        );
        for (attack, reason, words) in [
            (
                "raise",
                "ReconcileFailed",
                "RuntimeError: the Python hook gave up",
            ),
            ("no-answer", "ReconcileFailed", "wrote no HTTP answer"),
            (
                "status-500",
                "ReconcileFailed",
                "answered status 500: internal trouble in the Python hook",
            ),
            (
                "not-json",
                "ReconcileFailed",
                "the sync hook's answer is not JSON",
            ),
            ("spin", "GuestTimeout", "deadline exceeded"),
        ] {
            let err = guest.reconcile(&parent(attack)).unwrap_err();
            eprintln!("{attack}: {}: {err}", err.reason().as_str());
            ensure!(
                err.reason().as_str() == reason && err.to_string().contains(words),
                "{attack}: expected {reason} with {words:?}, got {}: {err}",
                err.reason().as_str()
            );
        }
        Ok(())
    })
    .await?
}

/// The build refuses, in one line naming the field or the file, what it
/// cannot run: a field it does not know, an update strategy it cannot
/// honour, a missing hook file, a hook file that does not load (either
/// language), an unknown resource; and picks one definition by `--name`.
async fn the_build_refuses_what_it_cannot_run_naming_the_field_or_file(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let dir = hostile_dir();
    install_yaml(&env.client(), &dir.join("crd.yaml")).await?;
    let (_, kubeconfig) = admin_identity(&env, "wasmop-mc-refusals").await?;
    let work = env.temp_dir().join("mc-refusals");
    std::fs::create_dir_all(&work)?;
    let definition = std::fs::read_to_string(dir.join("controller.yaml"))?;
    let variant = |name: &str, text: String| -> anyhow::Result<PathBuf> {
        let path = work.join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    };
    let out = work.join("out.wasm");
    let cases: Vec<(&str, PathBuf, PathBuf, &str)> = vec![
        (
            "an unknown field",
            variant(
                "unknown.yaml",
                definition.replacen("spec:\n", "spec:\n  replicaz: 3\n", 1),
            )?,
            dir.join("hooks"),
            "spec.replicaz: unknown field",
        ),
        (
            "an update strategy it cannot honour",
            variant(
                "strategy.yaml",
                definition.replace("method: InPlace", "method: BlueGreen"),
            )?,
            dir.join("hooks"),
            "spec.childResources[0].updateStrategy.method",
        ),
        (
            "a customize hook without its file",
            variant(
                "customize.yaml",
                definition.replace(
                    "  hooks:\n",
                    "  hooks:\n    customize:\n      webhook:\n        url: http://h/customize\n",
                ),
            )?,
            dir.join("hooks"),
            "no hook file for /sync and /customize",
        ),
        (
            "an unknown resource",
            variant(
                "resource.yaml",
                definition.replace("resource: configmaps", "resource: confgmaps"),
            )?,
            dir.join("hooks"),
            "spec.childResources[0]",
        ),
        (
            "no hook file",
            dir.join("controller.yaml"),
            work.clone(),
            "no hook file for /sync",
        ),
        (
            "a JavaScript hook that does not parse",
            dir.join("controller.yaml"),
            dir.join("broken-js"),
            "sync.js",
        ),
        (
            "a Python hook that does not load",
            dir.join("controller.yaml"),
            dir.join("broken-py"),
            "JSONDecodeError",
        ),
    ];
    for (what, definition, hooks, words) in cases {
        let (ok, said) = try_build(&definition, &[], &hooks, &kubeconfig, &out)?;
        let last = said
            .lines()
            .rev()
            .find(|l| l.starts_with("error:"))
            .unwrap_or("");
        eprintln!("{what}: {last}");
        ensure!(!ok, "{what}: the build succeeded");
        ensure!(
            said.contains(words),
            "{what}: expected {words:?} in:\n{said}"
        );
        ensure!(!last.is_empty(), "{what}: no one-line error:\n{said}");
    }
    // Several definitions in one file: --name picks one.
    let two = variant(
        "two.yaml",
        format!(
            "{definition}\n---\n{}",
            definition.replace("name: hostile-hooks", "name: second")
        ),
    )?;
    let (ok, said) = try_build(&two, &[], &dir.join("hooks"), &kubeconfig, &out)?;
    ensure!(
        !ok && said.contains("--name"),
        "two definitions without --name: {said}"
    );
    let (ok, said) = try_build(
        &two,
        &["--name", "second"],
        &dir.join("hooks"),
        &kubeconfig,
        &out,
    )?;
    ensure!(ok && said.contains("CompositeController second"), "{said}");
    Ok(())
}

/// Each attack of the hostile customize hook pair (a cluster-scoped
/// parent), the reason its parent's condition must show and words its
/// message must hold.
const CUSTOMIZE_ATTACKS: &[(&str, &str, &str)] = &[
    ("too-many-rules", "ReconcileFailed", "more than the 16"),
    ("host-namespace", "ReconcileFailed", "the wasmop host's own"),
    ("unknown-resource", "ReconcileFailed", "\"widgets\""),
    ("names-and-selector", "ReconcileFailed", "one or the other"),
    ("roles", "ReconcileFailed", "grants power (RBAC)"),
    (
        "customize-raises",
        "ReconcileFailed",
        "the customize hook failed: hook customize raised RuntimeError",
    ),
    (
        "no-namespace",
        "InvalidGuestResponse",
        "must name its metadata.namespace",
    ),
];

/// Each attack of the hostile decorator on its target, and words of the
/// Warning Event the target gets.
const DECORATOR_ATTACKS: &[(&str, &str)] = &[
    ("host-label", "wasmop.dev/"),
    ("bad-key", "labels key"),
    ("not-strings", "not a map of strings"),
];

/// A customize hook that names too much, the host's own namespace, what
/// nobody serves, both names and a selector or a kind that grants power
/// the guest was not granted fails its parent with the reason; related
/// Secrets (granted) reach the hook concealed; a namespaced child of
/// a cluster-scoped parent names its namespace or is refused. A decorator
/// that sets a host label or what is not a label fails with a Warning
/// Event on its target, which keeps its labels; a status on a kind without
/// a status subresource is left out; a ConfigMap its selector does not take
/// is never touched.
async fn hostile_customize_hooks_and_decorators_are_refused_and_nothing_is_written(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let dir = hostile_dir();
    let client = env.client();
    install_yaml(&client, &dir.join("customize/crd.yaml")).await?;
    let own = env.create_namespace("mc-hostile-own").await?;
    let related = env.create_namespace("mc-hostile-rel").await?;
    let (_, kubeconfig) = admin_identity(&env, &format!("wasmop-{own}")).await?;
    let customize = build(
        &env,
        &dir.join("customize"),
        &kubeconfig,
        &format!("{own}-c.wasm"),
    )?;
    let decorator = build(
        &env,
        &dir.join("decorator"),
        &kubeconfig,
        &format!("{own}-d.wasm"),
    )?;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "password"}, "data": {"password": "aHVudGVyMg=="},
    }))?;
    Api::<Secret>::namespaced(client.clone(), &related)
        .create(&PostParams::default(), &secret)
        .await?;
    let maps = Api::<ConfigMap>::namespaced(client.clone(), &related);
    let target = |name: &str, attack: &str, selected: bool| -> anyhow::Result<ConfigMap> {
        let mut labels = json!({"remove-me": "x"});
        if selected {
            labels["mc.example.com/hostile-target"] = json!("");
        }
        Ok(serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels, "annotations": {"attack": attack}},
            "data": {"a": "b"},
        }))?)
    };
    for (attack, _) in DECORATOR_ATTACKS
        .iter()
        .chain(&[("none", ""), ("status", "")])
    {
        maps.create(
            &PostParams::default(),
            &target(&format!("t-{attack}"), attack, true)?,
        )
        .await?;
    }
    maps.create(
        &PostParams::default(),
        &target("unselected", "none", false)?,
    )
    .await?;
    let (c, d) = (
        format!("hostile-customize={}", customize.display()),
        format!("hostile-decorator={}", decorator.display()),
    );
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &own,
        &[
            "--guest",
            &c,
            "--guest",
            &d,
            "--leader-elect-namespace",
            &own,
            "--privileged-kind",
            "Secret",
        ],
    )?;
    let parents = Api::<DynamicObject>::all_with(
        client.clone(),
        &kube::api::ApiResource {
            group: "mc.example.com".into(),
            version: "v1".into(),
            api_version: "mc.example.com/v1".into(),
            kind: "HostileCustomize".into(),
            plural: "hostilecustomizes".into(),
        },
    );
    let name = |attack: &str| format!("{own}-{attack}");
    for (attack, _, _) in CUSTOMIZE_ATTACKS
        .iter()
        .chain(&[("none", "", ""), ("secrets", "", "")])
    {
        let namespace = if *attack == "host-namespace" {
            &own
        } else {
            &related
        };
        let parent: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "mc.example.com/v1", "kind": "HostileCustomize",
            "metadata": {"name": name(attack)},
            "spec": {"attack": attack, "namespace": namespace},
        }))?;
        parents.create(&PostParams::default(), &parent).await?;
    }
    let context = |host: &HostProcess| tail(&host.log(), 40);
    // The well-behaved parents see what they relate: ConfigMaps by
    // namespace/name, Secrets concealed.
    wait_for(Duration::from_secs(90), || async {
        let none = parents.get(&name("none")).await?;
        let seen = at(&none, "/status/configMaps").cloned().unwrap_or_default();
        Ok(seen
            .as_array()
            .is_some_and(|m| m.contains(&json!(format!("{related}/t-none"))))
            .then_some(()))
    })
    .await
    .with_context(|| context(&host))?;
    let secrets = wait_for(Duration::from_secs(90), || async {
        let seen = parents.get(&name("secrets")).await?;
        Ok(at(&seen, "/status").filter(|s| s["secrets"] == 1).cloned())
    })
    .await
    .with_context(|| context(&host))?;
    ensure!(
        secrets["unconcealed"] == json!([]),
        "a related Secret's value reached the hook: {secrets}"
    );
    each_fails_as_said(&parents, CUSTOMIZE_ATTACKS, name, &host).await?;
    // The decorator: the well-behaved target is decorated (a label set,
    // one removed), the one given a status too (its label set, the status
    // left out); the others fail with a Warning Event and keep their
    // labels.
    for (decorated, removed) in [("t-none", true), ("t-status", false)] {
        wait_for(Duration::from_secs(90), || async {
            let labels = maps
                .get(decorated)
                .await?
                .metadata
                .labels
                .unwrap_or_default();
            Ok((labels.get("decorated").map(String::as_str) == Some("yes")
                && labels.contains_key("remove-me") != removed)
                .then_some(()))
        })
        .await
        .with_context(|| format!("{decorated} was not decorated\n{}", context(&host)))?;
    }
    for (attack, words) in DECORATOR_ATTACKS {
        let target = format!("t-{attack}");
        let note = wait_for(Duration::from_secs(90), || async {
            let events = crate::support::events_about(&client, &related, &target).await?;
            Ok(events
                .into_iter()
                .find(|(kind, _, note)| kind == "Warning" && note.contains(words))
                .map(|(_, _, note)| note))
        })
        .await
        .with_context(|| format!("{attack}: no Warning Event\n{}", context(&host)))?;
        eprintln!("{attack}: {note}");
        let labels = maps.get(&target).await?.metadata.labels.unwrap_or_default();
        ensure!(
            labels.contains_key("remove-me") && labels.len() == 2,
            "{attack}: the target's labels changed: {labels:?}"
        );
    }
    let untouched = maps
        .get("unselected")
        .await?
        .metadata
        .labels
        .unwrap_or_default();
    ensure!(
        !untouched.contains_key("decorated") && untouched.contains_key("remove-me"),
        "a ConfigMap the selector does not take was decorated: {untouched:?}"
    );
    // No child anywhere: the refused answers wrote nothing.
    ensure!(
        Api::<ConfigMap>::all(client.clone())
            .list(&ListParams::default().labels("wasmop.dev/guest=hostile-customize"))
            .await?
            .items
            .is_empty(),
        "a child of a refused answer was written"
    );
    ensure!(host.is_running(), "the host died:\n{}", context(&host));
    for (attack, _, _) in CUSTOMIZE_ATTACKS
        .iter()
        .chain(&[("none", "", ""), ("secrets", "", "")])
    {
        parents.delete(&name(attack), &Default::default()).await?;
    }
    host.stop();
    Ok(())
}

pub fn tests() -> Vec<Test> {
    let long = Duration::from_secs(300);
    wasmop_testenv::tests![
        a_javascript_statefulset_like_controller_rolls_one_pod_at_a_time_and_finalizes => long,
        a_python_controller_with_generate_selector_updates_in_place_and_reports_a_raising_hook => long,
        the_statefulset_like_controller_with_its_python_hook_passes_the_same_test => long,
        hostile_javascript_hooks_fail_their_parent_in_their_own_words_and_nothing_is_written => long,
        hostile_python_hooks_fail_the_reconcile_in_their_own_words => long,
        the_build_refuses_what_it_cannot_run_naming_the_field_or_file => long,
        a_python_controller_with_a_customize_hook_propagates_across_namespaces => long,
        a_python_decorator_attaches_services_to_the_deployments_it_selects => long,
        hostile_customize_hooks_and_decorators_are_refused_and_nothing_is_written => long,
        without_generate_selector_a_parents_selector_adopts_the_orphans_it_matches => long,
    ]
}
