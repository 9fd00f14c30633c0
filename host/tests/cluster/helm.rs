//! The Helm chart in `deploy/chart`, with the real helm (built from
//! `tests/helm`, or `TEST_ASSET_HELM`) used as users use it: `helm lint`,
//! `helm template` against `kubectl kustomize deploy/` (the chart and
//! `deploy/` are one truth: this module fails when they drift), `helm
//! install --dry-run=server`, `helm install` and `helm upgrade` into the
//! control plane, a values file the schema refuses, and `helm package` +
//! `helm push` to a real OCI registry followed by `helm install oci://…`.
//! Last, `kubectl wasmop` runs the wasmop binary as kubectl's plugin.
//!
//! Helm's config, cache and data directories are a temporary directory of
//! the test's; its kubeconfig is the test environment's. The installs run
//! alone: the chart's ClusterRoles and ClusterRoleBindings have fixed names
//! (`wasmop`, `wasmop-guest-cache-operator`), and its CRD is the Cache CRD
//! other tests install with one version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use wasmop_testenv::TestEnv;
use wasmop_testenv::harness::Test;

use crate::support::{guest_module, kubectl, wait_for, workspace};

const LONG: Duration = Duration::from_secs(120);
const CACHE_CRD: &str = "caches.apps.example.com";

pub fn tests() -> Vec<Test> {
    wasmop_testenv::tests![
        the_chart_passes_helm_lint => 600,
        the_chart_renders_what_deploy_installs => 600,
        the_api_server_accepts_the_chart_in_a_server_side_dry_run => 600,
        a_bad_value_is_refused_by_the_values_schema_naming_it => 600,
        kubectl_runs_wasmop_as_its_plugin,
        #[alone] helm_install_and_upgrade_set_up_the_host_as_the_values_say => 600,
        #[alone] the_chart_pushed_to_an_oci_registry_installs_from_it => 600,
    ]
}

/// The helm binary with its directories in a temporary directory and the
/// test environment's kubeconfig.
struct Helm {
    program: PathBuf,
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Helm {
    /// Builds helm first if it is missing (minutes, on a blocking thread).
    async fn new(env: &TestEnv) -> anyhow::Result<Helm> {
        let program = tokio::task::spawn_blocking(wasmop_testenv::ensure_helm).await??;
        Ok(Helm {
            program,
            home: tempfile::Builder::new().prefix("wasmop-helm-").tempdir()?,
            kubeconfig: env.kubeconfig_path().to_owned(),
        })
    }

    /// A file in the temporary directory with `text`, and its path.
    fn file(&self, name: &str, text: &str) -> anyhow::Result<String> {
        let path = self.home.path().join(name);
        std::fs::write(&path, text)?;
        Ok(path.to_str().context("utf-8 path")?.to_owned())
    }

    /// Runs helm with `args` in the workspace; returns (success, stdout,
    /// stderr).
    async fn run(&self, args: &[&str]) -> anyhow::Result<(bool, String, String)> {
        let home = self.home.path();
        let mut command = Command::new(&self.program);
        command
            .args(args)
            .current_dir(workspace())
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env("KUBECONFIG", &self.kubeconfig);
        let out = tokio::task::spawn_blocking(move || command.output())
            .await?
            .context("running helm")?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// [`Helm::run`] that fails unless helm exits 0; returns its stdout.
    async fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let (ok, stdout, stderr) = self.run(args).await?;
        ensure!(ok, "helm {} failed:\n{stdout}\n{stderr}", args.join(" "));
        Ok(stdout)
    }

    /// `helm template wasmop` of the chart with `values` (flags such as
    /// `--set …`): the rendered manifests.
    async fn template(&self, values: &[&str]) -> anyhow::Result<String> {
        let mut args = vec!["template", "wasmop", CHART];
        args.extend(values);
        self.ok(&args).await
    }
}

/// The chart's directory, relative to the workspace (helm runs there).
const CHART: &str = "deploy/chart";

/// The objects of a multi-document YAML text by `<kind> <namespace>/<name>`,
/// each guest list's `guests.yaml` parsed (the chart writes it from a
/// value, without deploy/'s comments).
fn objects(yaml: &str) -> anyhow::Result<BTreeMap<String, Value>> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml)?;
    let mut objects = BTreeMap::new();
    for mut doc in docs.into_iter().filter(|d| !d.is_null()) {
        let key = format!(
            "{} {}/{}",
            doc["kind"].as_str().context("an object without kind")?,
            doc["metadata"]["namespace"].as_str().unwrap_or(""),
            doc["metadata"]["name"]
                .as_str()
                .context("an object without name")?,
        );
        if let Some(list) = doc.pointer_mut("/data/guests.yaml") {
            let parsed: Value = serde_saphyr::from_str(list.as_str().unwrap_or(""))?;
            *list = parsed;
        }
        ensure!(objects.insert(key.clone(), doc).is_none(), "{key} twice");
    }
    Ok(objects)
}

/// Fails naming each object only one side has and the first field that
/// differs in each object both have.
fn same_objects(
    chart: &BTreeMap<String, Value>,
    deploy: &BTreeMap<String, Value>,
    what: &str,
) -> anyhow::Result<()> {
    let mut drift = Vec::new();
    for key in chart.keys().chain(deploy.keys()) {
        match (chart.get(key), deploy.get(key)) {
            (Some(c), Some(d)) if c != d => {
                let (path, c, d) = first_difference(c, d, String::new());
                drift.push(format!(
                    "{key} differs at {path}:\n  chart:   {c}\n  deploy/: {d}"
                ))
            }
            (Some(_), None) => drift.push(format!("{key}: only in the chart")),
            (None, Some(_)) => drift.push(format!("{key}: only in deploy/")),
            _ => {}
        }
    }
    drift.dedup();
    ensure!(
        drift.is_empty(),
        "{what}: the chart and deploy/ drifted (make them one again):\n{}",
        drift.join("\n")
    );
    Ok(())
}

/// The JSON pointer of the first place `a` and `b` differ, and the values
/// there.
fn first_difference(a: &Value, b: &Value, path: String) -> (String, Value, Value) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let (u, v) = (x.get(key), y.get(key));
                if u != v {
                    let here = format!("{path}/{key}");
                    return match (u, v) {
                        (Some(u), Some(v)) => first_difference(u, v, here),
                        _ => (
                            here,
                            u.cloned().unwrap_or_default(),
                            v.cloned().unwrap_or_default(),
                        ),
                    };
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                if u != v {
                    return first_difference(u, v, format!("{path}/{i}"));
                }
            }
        }
        _ => {}
    }
    (path, a.clone(), b.clone())
}

/// `kubectl kustomize <dir>` (kubectl's own kustomize, as `kubectl apply -k`
/// uses it).
fn kustomize(env: &TestEnv, dir: &str) -> anyhow::Result<String> {
    let path = workspace().join(dir);
    let (ok, stdout, stderr) = kubectl(env, &["kustomize", path.to_str().context("utf-8")?], None)?;
    ensure!(ok, "kubectl kustomize {dir} failed: {stderr}");
    Ok(stdout)
}

async fn the_chart_passes_helm_lint(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let helm = Helm::new(&env).await?;
    let out = helm.ok(&["lint", "--strict", CHART]).await?;
    ensure!(
        out.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{out}"
    );
    // The optional kit renders and lints too.
    helm.ok(&[
        "lint",
        "--strict",
        CHART,
        "--set",
        "monitoring.enabled=true",
    ])
    .await?;
    Ok(())
}

async fn the_chart_renders_what_deploy_installs(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let helm = Helm::new(&env).await?;
    // Default values: what `kubectl apply -k deploy/` installs, CRD included.
    let chart = objects(&helm.template(&["--include-crds"]).await?)?;
    let deploy = objects(&kustomize(&env, "deploy")?)?;
    same_objects(&chart, &deploy, "default values")?;

    // monitoring.enabled: deploy/ and deploy/monitoring/.
    let chart = objects(
        &helm
            .template(&["--include-crds", "--set", "monitoring.enabled=true"])
            .await?,
    )?;
    let mut deploy = objects(&kustomize(&env, "deploy")?)?;
    deploy.extend(objects(&kustomize(&env, "deploy/monitoring")?)?);
    same_objects(&chart, &deploy, "monitoring.enabled=true")?;

    // guestIdentity=host: the roles `wasmop rbac --guest-identity host`
    // prints for the same guests (deploy/rbac/roles.yaml is the
    // impersonate ones).
    let chart = objects(&helm.template(&["--set", "guestIdentity=host"]).await?)?;
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args([
            "rbac",
            "--guest-identity",
            "host",
            "--webhook-cert-secret",
            "wasmop-webhook-tls",
        ])
        .arg("--guest")
        .arg(format!(
            "cache-operator={}",
            guest_module("cache-operator")?.display()
        ))
        .arg("--guest")
        .arg(format!(
            "cache-operator={}",
            guest_module("cache-operator-v2")?.display()
        ))
        .output()?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let roles = objects(&String::from_utf8(out.stdout)?)?;
    let chart_roles: BTreeMap<String, Value> = chart
        .iter()
        .filter(|(_, o)| {
            o["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("rbac."))
                || o["kind"] == "ServiceAccount"
        })
        .map(|(k, o)| (k.clone(), o.clone()))
        .collect();
    same_objects(&chart_roles, &roles, "guestIdentity=host roles")?;
    let deployment = &chart["Deployment wasmop-system/wasmop"];
    ensure!(
        args_of(deployment).contains(&"--guest-identity=host".to_owned()),
        "{deployment}"
    );

    // The chart reads these as data: copies of deploy/'s files.
    for (copy, original) in [
        ("deploy/chart/crds/cache.yaml", "deploy/crds/cache.yaml"),
        (
            "deploy/chart/files/alerts.yaml",
            "deploy/monitoring/alerts.yaml",
        ),
        (
            "deploy/chart/files/dashboard.json",
            "deploy/monitoring/dashboard.json",
        ),
    ] {
        ensure!(
            std::fs::read(workspace().join(copy))? == std::fs::read(workspace().join(original))?,
            "{copy} differs from {original}: copy it again"
        );
    }
    Ok(())
}

/// The host container's args in a Deployment (JSON).
fn args_of(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

async fn the_api_server_accepts_the_chart_in_a_server_side_dry_run(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let helm = Helm::new(&env).await?;
    let ns = env.create_namespace("helm-dry-run").await?;

    // helm's own: the manifests checked against the server's schemas,
    // nothing created.
    let target = format!("{ns}-host");
    let out = helm
        .ok(&[
            "install",
            "wasmop",
            CHART,
            "--namespace",
            &ns,
            "--set",
            &format!("namespace={target}"),
            "--dry-run=server",
        ])
        .await?;
    ensure!(out.contains("STATUS: pending-install"), "{out}");
    let namespaces: Api<Namespace> = Api::all(env.client());
    ensure!(
        namespaces.get_opt(&target).await?.is_none(),
        "a dry run created namespace {target}"
    );

    // `helm template` sent to the API server, which runs its admission and
    // validation and stores nothing (the namespace is the test's own, which
    // exists: a dry run creates no namespace for the objects in it).
    let rendered = helm
        .template(&["--include-crds", "--set", &format!("namespace={ns}")])
        .await?;
    let apply = [
        "apply",
        "--server-side",
        // Other tests installed the Cache CRD with one version, under
        // their own field manager.
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        "-",
    ];
    let (ok, stdout, stderr) = kubectl(&env, &apply, Some(&rendered))?;
    ensure!(ok, "the API server refused the chart:\n{stdout}\n{stderr}");
    for object in [
        "customresourcedefinition.apiextensions.k8s.io/caches.apps.example.com",
        "clusterrole.rbac.authorization.k8s.io/wasmop",
        "deployment.apps/wasmop",
        "configmap/wasmop-guests",
        "service/wasmop-webhook",
    ] {
        ensure!(stdout.contains(object), "{object} not applied:\n{stdout}");
    }
    // The server's checks are real: a value the schema lets through but
    // the API server does not (a CPU quantity) is refused there.
    let rendered = helm
        .template(&[
            "--set",
            &format!("namespace={ns}"),
            "--set-json",
            r#"resources={"limits":{"cpu":"lots"}}"#,
        ])
        .await?;
    let (ok, _, stderr) = kubectl(&env, &apply, Some(&rendered))?;
    ensure!(
        !ok && stderr.contains("quantities must match"),
        "the API server took a CPU limit of \"lots\": {stderr}"
    );

    // Signed modules: the flags, and the trusted keys in a ConfigMap the
    // Deployment mounts, which the API server accepts and the host reads.
    let key = sigstore::crypto::SigningScheme::ECDSA_P256_SHA256_ASN1
        .create_signer()?
        .to_sigstore_keypair()?
        .public_key_to_pem()?;
    let rendered = helm
        .template(&[
            "--set",
            &format!("namespace={ns}"),
            "--set",
            "signatures.require=true",
            "--set-json",
            &format!("signatures.trustedKeys={}", serde_json::to_string(&[&key])?),
        ])
        .await?;
    let (ok, stdout, stderr) = kubectl(&env, &apply, Some(&rendered))?;
    ensure!(
        ok,
        "the API server refused the chart with signatures:\n{stdout}\n{stderr}"
    );
    ensure!(stdout.contains("configmap/wasmop-trusted-keys"), "{stdout}");
    let chart = objects(&rendered)?;
    let args = args_of(&chart[&format!("Deployment {ns}/wasmop")]);
    for flag in [
        "--require-signed-modules",
        "--trusted-keys=/etc/wasmop/trusted-keys/keys.pem",
    ] {
        ensure!(args.contains(&flag.to_owned()), "{flag} not in {args:?}");
    }
    let pem = chart[&format!("ConfigMap {ns}/wasmop-trusted-keys")]["data"]["keys.pem"]
        .as_str()
        .context("keys.pem")?;
    let keys = wasmop_host::source::signature::Keys::parse([pem]).map_err(anyhow::Error::msg)?;
    ensure!(!keys.is_empty(), "{pem}");
    Ok(())
}

async fn a_bad_value_is_refused_by_the_values_schema_naming_it(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let helm = Helm::new(&env).await?;
    for (values, named) in [
        ("replicas: three\n", "replicas"),
        ("logFormat: xml\n", "logFormat"),
        ("guestIdentity: nobody\n", "guestIdentity"),
        ("replica: 3\n", "replica"),
    ] {
        let file = helm.file("values.yaml", values)?;
        let (ok, stdout, stderr) = helm
            .run(&["template", "wasmop", CHART, "-f", &file])
            .await?;
        ensure!(!ok, "helm rendered the chart with {values:?}:\n{stdout}");
        ensure!(
            stderr.contains("values don't meet the specifications of the schema")
                && stderr.contains(named),
            "the refusal of {values:?} does not name {named}:\n{stderr}"
        );
    }
    Ok(())
}

async fn helm_install_and_upgrade_set_up_the_host_as_the_values_say(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let helm = Helm::new(&env).await?;
    let client = env.client();
    // The release's record lives in `ns`, the host in `target`, which the
    // chart creates.
    let ns = env.create_namespace("helm-install").await?;
    let target = format!("{ns}-host");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_before = crds.get_opt(CACHE_CRD).await?;

    let values = helm.file(
        "values.yaml",
        &format!(
            "namespace: {target}\n\
             guests:\n\
             \x20 - name: cache-operator\n\
             \x20   module: {{file: /modules/cache-operator.wasm}}\n\
             \x20   concurrency: 3\n\
             \x20 - name: tutorial\n\
             \x20   module: {{file: /modules/tutorial-cache.wasm}}\n"
        ),
    )?;
    let mut install = vec![
        "install",
        "wasmop",
        CHART,
        "--namespace",
        &ns,
        "-f",
        &values,
    ];
    install.extend(keep_crd(crd_before.as_ref()));
    helm.ok(&install).await?;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &target);
    let deployment = deployments.get("wasmop").await?;
    let spec = serde_json::to_value(&deployment)?;
    ensure!(spec["spec"]["replicas"] == 3, "replicas: {}", spec["spec"]);
    let args = args_of(&spec);
    for arg in [
        "--leader-elect".to_owned(),
        "--guest-identity=impersonate".to_owned(),
        "--log-format=json".to_owned(),
        format!("--guests-configmap={target}/wasmop-guests"),
        format!("--webhook-host=wasmop-webhook.{target}.svc:443"),
        format!("--webhook-cert-secret={target}/wasmop-webhook-tls"),
    ] {
        ensure!(args.contains(&arg), "{arg} not in {args:?}");
    }
    ensure!(
        spec["spec"]["template"]["spec"]["containers"][0]["image"] == "wasmop:0.1.0",
        "image: {}",
        spec["spec"]["template"]["spec"]["containers"][0]["image"]
    );
    // The guest list is the value `guests`.
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &target);
    let list = maps.get("wasmop-guests").await?;
    let text = list
        .data
        .as_ref()
        .and_then(|d| d.get("guests.yaml"))
        .context("no guests.yaml")?;
    let parsed: Value = serde_saphyr::from_str(text)?;
    ensure!(
        parsed
            == json!({"guests": [
                {"name": "cache-operator", "module": {"file": "/modules/cache-operator.wasm"}, "concurrency": 3},
                {"name": "tutorial", "module": {"file": "/modules/tutorial-cache.wasm"}},
            ]}),
        "guest list: {parsed}"
    );
    // The identities and roles, the CRD (crds/: installed when absent,
    // otherwise left as it is), and the release.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &target);
    for account in ["wasmop", "wasmop-guest-cache-operator"] {
        accounts
            .get(account)
            .await
            .with_context(|| format!("ServiceAccount {account}"))?;
    }
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    cluster_roles
        .get("wasmop")
        .await
        .context("ClusterRole wasmop")?;
    let crd_after = crds.get(CACHE_CRD).await?;
    match &crd_before {
        Some(before) => ensure!(
            before.metadata.resource_version == crd_after.metadata.resource_version,
            "helm changed the CRD other tests installed"
        ),
        None => ensure!(
            crd_after.spec.versions.len() == 2,
            "the chart's CRD has both versions"
        ),
    }
    let status: Value = serde_json::from_str(
        &helm
            .ok(&["status", "wasmop", "--namespace", &ns, "-o", "json"])
            .await?,
    )?;
    ensure!(
        status["info"]["status"] == "deployed",
        "release: {}",
        status["info"]["status"]
    );
    // kwok plays the kubelet: the three replicas become ready.
    wait_for(LONG, || async {
        let d = deployments.get("wasmop").await?;
        Ok((d.status.and_then(|s| s.ready_replicas) == Some(3)).then_some(()))
    })
    .await
    .context("the host's three replicas did not become ready")?;

    // An upgrade with other values changes the Deployment in place.
    helm.ok(&[
        "upgrade",
        "wasmop",
        CHART,
        "--namespace",
        &ns,
        "-f",
        &values,
        "--set",
        "replicas=5",
        "--set",
        "logFormat=text",
    ])
    .await?;
    let spec = serde_json::to_value(deployments.get("wasmop").await?)?;
    ensure!(spec["spec"]["replicas"] == 5, "replicas: {}", spec["spec"]);
    let args = args_of(&spec);
    ensure!(
        args.contains(&"--log-format=text".to_owned())
            && !args.contains(&"--log-format=json".to_owned()),
        "{args:?}"
    );

    // A guest list of the user's, named by guestsConfigMap: the host reads
    // it, and the chart's own is removed.
    let mut mine = ConfigMap::default();
    mine.metadata.name = Some("my-guests".to_owned());
    mine.data = Some(BTreeMap::from([(
        "guests.yaml".to_owned(),
        "guests:\n  - name: tutorial\n    module: {file: /modules/tutorial-cache.wasm}\n"
            .to_owned(),
    )]));
    maps.create(&PostParams::default(), &mine).await?;
    helm.ok(&[
        "upgrade",
        "wasmop",
        CHART,
        "--namespace",
        &ns,
        "-f",
        &values,
        "--set",
        "guestsConfigMap=my-guests",
    ])
    .await?;
    let spec = serde_json::to_value(deployments.get("wasmop").await?)?;
    let args = args_of(&spec);
    ensure!(
        args.contains(&format!("--guests-configmap={target}/my-guests")),
        "{args:?}"
    );
    ensure!(spec["spec"]["replicas"] == 3, "replicas: {}", spec["spec"]);
    ensure!(
        maps.get_opt("wasmop-guests").await?.is_none(),
        "the chart's guest list is still there beside guestsConfigMap"
    );
    ensure!(
        maps.get_opt("my-guests").await?.is_some(),
        "my-guests is gone"
    );

    uninstall(&helm, &env, &ns, &target, crd_before.is_none()).await
}

/// `--skip-crds` when the Cache CRD is already there: the other tests of
/// this binary apply their own variants of it under their own field
/// manager, and Helm 4 applies `crds/` server side, so the chart's CRD
/// would conflict with theirs (a user's cluster where another manager
/// owns the CRD is the same; docs/cluster.md says so). When it is absent,
/// the chart installs it.
fn keep_crd(before: Option<&CustomResourceDefinition>) -> Option<&'static str> {
    before.map(|_| "--skip-crds")
}

/// `helm uninstall`, then what helm leaves behind by design: the CRD of
/// crds/, deleted when the test installed it (other tests install it with
/// one version).
async fn uninstall(
    helm: &Helm,
    env: &TestEnv,
    ns: &str,
    target: &str,
    delete_crd: bool,
) -> anyhow::Result<()> {
    helm.ok(&["uninstall", "wasmop", "--namespace", ns, "--wait"])
        .await?;
    let client = env.client();
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    ensure!(
        cluster_roles.get_opt("wasmop").await?.is_none(),
        "helm uninstall left ClusterRole wasmop"
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let gone = namespaces
        .get_opt(target)
        .await?
        .is_none_or(|n| n.metadata.deletion_timestamp.is_some());
    ensure!(gone, "helm uninstall left namespace {target}");
    if delete_crd {
        let crds: Api<CustomResourceDefinition> = Api::all(client);
        crds.delete(CACHE_CRD, &DeleteParams::default()).await?;
    }
    Ok(())
}

async fn the_chart_pushed_to_an_oci_registry_installs_from_it(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let helm = Helm::new(&env).await?;
    let registry = wasmop_testenv::Registry::start(None).await?;
    let packages = helm.home.path().join("packages");
    let packages = packages.to_str().context("utf-8")?;
    let out = helm
        .ok(&["package", CHART, "--destination", packages])
        .await?;
    let package = Path::new(packages).join("wasmop-0.1.0.tgz");
    ensure!(
        package.is_file(),
        "helm package made no {}: {out}",
        package.display()
    );
    let (ok, stdout, stderr) = helm
        .run(&[
            "push",
            package.to_str().context("utf-8")?,
            &format!("oci://{}/charts", registry.address()),
            "--plain-http",
        ])
        .await?;
    ensure!(ok, "helm push failed:\n{stdout}\n{stderr}");
    // helm prints where it pushed and the digest (on stderr in helm 4).
    let pushed = format!("{stdout}{stderr}");
    ensure!(
        pushed.contains(&format!(
            "Pushed: {}/charts/wasmop:0.1.0",
            registry.address()
        )),
        "{pushed}"
    );

    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_before = crds.get_opt(CACHE_CRD).await?;
    let ns = env.create_namespace("helm-oci").await?;
    let target = format!("{ns}-host");
    let reference = format!("oci://{}/charts/wasmop", registry.address());
    let namespace = format!("namespace={target}");
    let mut install = vec![
        "install",
        "wasmop",
        &reference,
        "--version",
        "0.1.0",
        "--plain-http",
        "--namespace",
        &ns,
        "--set",
        &namespace,
    ];
    install.extend(keep_crd(crd_before.as_ref()));
    helm.ok(&install).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &target);
    let deployment = serde_json::to_value(deployments.get("wasmop").await?)?;
    ensure!(
        deployment["spec"]["replicas"] == 3,
        "{}",
        deployment["spec"]
    );
    let status: Value = serde_json::from_str(
        &helm
            .ok(&["status", "wasmop", "--namespace", &ns, "-o", "json"])
            .await?,
    )?;
    ensure!(
        status["info"]["status"] == "deployed" && status["version"] == 1,
        "release: {} version {}",
        status["info"]["status"],
        status["version"]
    );
    uninstall(&helm, &env, &ns, &target, crd_before.is_none()).await
}

async fn kubectl_runs_wasmop_as_its_plugin(env: Arc<TestEnv>) -> anyhow::Result<()> {
    // kubectl runs `kubectl-<name>` from PATH for `kubectl <name>`.
    let bin = tempfile::Builder::new()
        .prefix("wasmop-plugin-")
        .tempdir()?;
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_wasmop"),
        bin.path().join("kubectl-wasmop"),
    )?;
    let path = std::env::join_paths(std::iter::once(bin.path().to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    // A guest list and a rollout record, as a host leaves them.
    let ns = env.create_namespace("kubectl-plugin").await?;
    let maps: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let digest = "ab".repeat(32);
    for (name, key, value) in [
        (
            "wasmop-guests",
            "guests.yaml",
            "guests:\n  - name: cache-operator\n    module: {file: /modules/cache-operator.wasm}\n"
                .to_owned(),
        ),
        (
            "wasmop-guests-status",
            "cache-operator",
            format!("{{\"stable\": \"{digest}\", \"phase\": \"Stable\"}}"),
        ),
    ] {
        let mut map = ConfigMap::default();
        map.metadata.name = Some(name.to_owned());
        map.data = Some(BTreeMap::from([(key.to_owned(), value)]));
        maps.create(&PostParams::default(), &map).await?;
    }
    let out = Command::new("kubectl")
        .args([
            "wasmop",
            "status",
            "--guests-configmap",
            &format!("{ns}/wasmop-guests"),
        ])
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .env("PATH", &path)
        .output()
        .context("running kubectl: it must be on PATH")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "kubectl wasmop status failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = stdout
        .lines()
        .find(|l| l.starts_with("cache-operator"))
        .with_context(|| format!("no row for cache-operator:\n{stdout}"))?;
    ensure!(
        row.contains("Stable") && row.contains(&digest[..12]),
        "{stdout}"
    );
    if !stdout.starts_with("GUEST") {
        bail!("no table header:\n{stdout}");
    }
    Ok(())
}
