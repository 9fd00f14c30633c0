//! Shared helpers of the host's end-to-end tests: the `wasmop` binary as a
//! real process against the test control plane, CRD installation, guest
//! modules and polling.

#![allow(dead_code, missing_docs)]

pub mod fleet;
pub mod guests;
pub mod hostile;
pub mod lang;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::Value;
use wasmop_testenv::TestEnv;

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A built guest component, by file stem: from `WASMOP_GUESTS_DIR` when it
/// holds one of that name (the released-contract fixtures run the suites
/// against guests built before this host), else from `target/guests`.
/// Fails loudly when missing.
pub fn guest_module(name: &str) -> anyhow::Result<PathBuf> {
    let file = format!("{name}.wasm");
    if let Some(dir) = std::env::var_os("WASMOP_GUESTS_DIR").map(PathBuf::from) {
        let dir = if dir.is_absolute() {
            dir
        } else {
            workspace().join(dir)
        };
        if dir.join(&file).exists() {
            return Ok(dir.join(file));
        }
    }
    let path = workspace().join("target/guests").join(file);
    if !path.exists() {
        bail!(
            "{} is missing: build the guests first with `cargo xtask build-guests` (cargo xtask test does)",
            path.display()
        );
    }
    Ok(path)
}

/// Whether the guests come from `WASMOP_GUESTS_DIR` (the released-contract
/// fixtures, which lack the attacks added since).
pub fn released_guests() -> bool {
    std::env::var_os("WASMOP_GUESTS_DIR").is_some()
}

/// Applies every document of a YAML file (CRDs) and waits until CRDs are
/// established. A CRD the file gives no conversion loses the one a host may
/// have set on it (a host that serves a converting guest points the CRD at
/// its webhook, and leaves it so when it stops): a host without webhooks
/// refuses a converting guest whose CRD says `Webhook`.
pub async fn install_yaml(client: &Client, path: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)?;
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        if doc["kind"] == "CustomResourceDefinition" {
            let converts = doc["spec"].get("conversion").is_some();
            let crd: CustomResourceDefinition = serde_json::from_value(doc)?;
            install_crd(client, crd.clone()).await?;
            if !converts {
                no_webhook_conversion(client, &crd.name_any()).await?;
            }
        } else {
            bail!("install_yaml only installs CRDs, found {}", doc["kind"]);
        }
    }
    Ok(())
}

/// Sets the conversion of the CRD `name` back to `None` if a host pointed
/// it at its webhook. Only the tests that run alone serve a converting
/// guest's webhooks on a CRD other tests share (the hostile guest's), so no
/// host of another test is serving it meanwhile.
async fn no_webhook_conversion(client: &Client, name: &str) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(name).await?;
    if crd.spec.conversion.is_some_and(|c| c.strategy == "Webhook") {
        let patch =
            serde_json::json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
        crds.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("setting the conversion of {name} back to None"))?;
    }
    Ok(())
}

/// The Cache CRD of `deploy/` as JSON, with its group replaced by `group`.
pub fn cache_crd(group: &str) -> anyhow::Result<Value> {
    let path = workspace().join("deploy/crds/cache.yaml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .replace("apps.example.com", group);
    Ok(serde_saphyr::from_str(&text)?)
}

/// Installs the Cache CRD of `deploy/` with its v1alpha1 version alone: the
/// tests that run no conversion webhook need a version the API server
/// serves without one.
pub async fn install_cache_crd(client: &Client) -> anyhow::Result<()> {
    install_cache_crd_in(client, "apps.example.com").await
}

/// [`install_cache_crd`] under `group`.
pub async fn install_cache_crd_in(client: &Client, group: &str) -> anyhow::Result<()> {
    let crd = wasmop_testenv::crd::single_version(cache_crd(group)?, "v1alpha1")?;
    install_crd(client, serde_json::from_value(crd)?).await
}

/// Applies `crd` and waits until it is established.
pub async fn install_crd(client: &Client, crd: CustomResourceDefinition) -> anyhow::Result<()> {
    wasmop_testenv::crd::install(client, &crd).await
}

/// Polls `f` every 200 ms until it returns `Some`, or fails after `timeout`
/// with the last error.
pub async fn wait_for<T, F, Fut>(timeout: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last = String::from("condition never held");
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = format!("{e:#}"),
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An `Api` for a kind in a namespace.
pub fn dyn_api(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    ns: &str,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// The group of the Cache CRD as `deploy/crds/` ships it.
pub const CACHE_GROUP: &str = "apps.example.com";

/// Leader election with short leases, so failover cases are quick: a
/// restarted host (a new identity) waits [`LEASE_DURATION`] for the Leases
/// its predecessor held.
pub const LEASE: &[&str] = wasmop_testenv::SHORT_LEASE;

/// The lease duration of [`LEASE`].
pub const LEASE_DURATION: Duration = wasmop_testenv::SHORT_LEASE_DURATION;

/// The Cache API in `ns`.
pub fn caches(client: &Client, ns: &str) -> Api<DynamicObject> {
    caches_in(client, CACHE_GROUP, ns)
}

/// The `v1alpha1` Cache API of a Cache CRD installed under `group`
/// ([`install_cache_crd_in`]) in `ns`.
pub fn caches_in(client: &Client, group: &str, ns: &str) -> Api<DynamicObject> {
    dyn_api(client, group, "v1alpha1", "Cache", "caches", ns)
}

/// The API of the hostile test guest's kind in `ns`.
pub fn hostiles(client: &Client, ns: &str) -> Api<DynamicObject> {
    dyn_api(
        client,
        "test.wasmop.dev",
        "v1alpha1",
        "Hostile",
        "hostiles",
        ns,
    )
}

/// Creates the Cache `name` in `ns` with `spec`.
pub async fn create_cache(
    client: &Client,
    ns: &str,
    name: &str,
    spec: Value,
) -> anyhow::Result<()> {
    create_cache_in(client, CACHE_GROUP, ns, name, spec).await
}

/// [`create_cache`] of a Cache CRD installed under `group`.
pub async fn create_cache_in(
    client: &Client,
    group: &str,
    ns: &str,
    name: &str,
    spec: Value,
) -> anyhow::Result<()> {
    let cache = serde_json::from_value(serde_json::json!({
        "apiVersion": format!("{group}/v1alpha1"),
        "kind": "Cache",
        "metadata": {"name": name},
        "spec": spec,
    }))?;
    caches_in(client, group, ns)
        .create(&kube::api::PostParams::default(), &cache)
        .await?;
    Ok(())
}

/// Creates a Cache of one `redis:7.2` replica named `name` in `ns`.
pub async fn create_small_cache(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<()> {
    create_small_cache_in(client, CACHE_GROUP, ns, name).await
}

/// [`create_small_cache`] of a Cache CRD installed under `group`.
pub async fn create_small_cache_in(
    client: &Client,
    group: &str,
    ns: &str,
    name: &str,
) -> anyhow::Result<()> {
    create_cache_in(
        client,
        group,
        ns,
        name,
        serde_json::json!({"image": "redis:7.2", "replicas": 1}),
    )
    .await
}

/// A running `wasmop` process; killed on drop.
pub struct HostProcess {
    child: Child,
    log: PathBuf,
}

/// The compiled-module cache every host of one test binary uses unless its
/// test gives a `--cache-dir` of its own: the host names each artifact by
/// the module's sha256 and the engine's configuration and writes it by
/// rename, so hosts running at once share it safely, and a module is
/// compiled once per binary instead of once per host.
pub fn shared_module_cache(env: &TestEnv) -> PathBuf {
    env.temp_dir().join("compiled-modules")
}

impl HostProcess {
    /// Starts a host with an admin identity of its own that follows the
    /// guest list `list` in `ns`, with the binary's [`shared_module_cache`].
    pub async fn follow_list(env: &TestEnv, ns: &str, list: &str) -> anyhow::Result<Self> {
        Self::follow_list_caching_in(env, ns, list, &shared_module_cache(env)).await
    }

    /// [`HostProcess::follow_list`] with a compiled-module cache of its
    /// own, empty at first: for a test that watches the host compile.
    pub async fn follow_list_compiling(
        env: &TestEnv,
        ns: &str,
        list: &str,
    ) -> anyhow::Result<Self> {
        let cache_dir = env.temp_dir().join(format!("cache-{ns}"));
        Self::follow_list_caching_in(env, ns, list, &cache_dir).await
    }

    async fn follow_list_caching_in(
        env: &TestEnv,
        ns: &str,
        list: &str,
        cache_dir: &Path,
    ) -> anyhow::Result<Self> {
        let (_, kubeconfig) = admin_identity(env, &format!("wasmop-{ns}")).await?;
        Self::start(
            env,
            &kubeconfig,
            ns,
            &[
                "--guests-configmap",
                &format!("{ns}/{list}"),
                "--cache-dir",
                cache_dir.to_str().context("utf-8")?,
            ],
        )
    }

    /// Starts `wasmop run <args>` with `kubeconfig`, logging to a file in the
    /// env's temp dir.
    pub fn start(
        env: &TestEnv,
        kubeconfig: &Path,
        label: &str,
        args: &[&str],
    ) -> anyhow::Result<Self> {
        Self::start_with_env(env, kubeconfig, label, args, &[])
    }

    /// [`HostProcess::start`] with `vars` in the host's environment.
    pub fn start_with_env(
        env: &TestEnv,
        kubeconfig: &Path,
        label: &str,
        args: &[&str],
        vars: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let log = env
            .temp_dir()
            .join(format!("wasmop-{label}-{}.log", std::process::id()));
        let log = unique(log);
        let file = std::fs::File::create(&log)?;
        // Many hosts run at once here: each serves its metrics and probes
        // on a port of its own (read back with `HostProcess::endpoint`),
        // and keeps compiled modules in the shared cache unless told where.
        let mut defaults = Vec::new();
        for flag in ["--metrics-bind-address", "--health-probe-bind-address"] {
            if !args.contains(&flag) {
                defaults.extend([flag, "127.0.0.1:0"]);
            }
        }
        let shared = shared_module_cache(env);
        if !args.contains(&"--cache-dir") {
            defaults.extend(["--cache-dir", shared.to_str().context("utf-8")?]);
        }
        let child = Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .args(defaults)
            .env("WASMOP_LOG", "info,wasmop_host=debug,kube_runtime=warn")
            .envs(vars.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .context("starting wasmop")?;
        Ok(Self { child, log })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where the host serves `which` ("metrics" or "probes"), once it says
    /// so in its log.
    pub async fn endpoint(&mut self, which: &str) -> anyhow::Result<std::net::SocketAddr> {
        let needle = format!("serving {which} on");
        self.wait_for_log(&needle, Duration::from_secs(60)).await?;
        let log = self.log();
        let line = log
            .lines()
            .find(|l| l.contains(&needle))
            .context("endpoint line")?;
        let addr = line
            .split("bound=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .context("no bound= in the endpoint line")?;
        Ok(addr.parse()?)
    }

    /// Sends SIGTERM and waits (at most `timeout`) for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> anyhow::Result<std::process::ExitStatus> {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).context("pid")?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                bail!("wasmop did not exit within {timeout:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything the host logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// "running", or how the process ended, for a failure's message.
    pub fn state(&mut self) -> String {
        match self.child.try_wait() {
            Ok(None) => "running".to_owned(),
            Ok(Some(status)) => format!("ended: {status}"),
            Err(e) => format!("unknown: {e}"),
        }
    }

    /// Waits until the log contains `needle`.
    pub async fn wait_for_log(&mut self, needle: &str, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log().contains(needle) {
                return Ok(());
            }
            if !self.is_running() {
                bail!("wasmop exited early; log:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "wasmop never logged {needle:?} within {timeout:?}; log tail:\n{}",
            tail(&self.log(), 40)
        )
    }

    /// Stops the process (SIGKILL) and waits for it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("wasmop log tail:\n{}", tail(&self.log(), 40));
        }
    }
}

fn unique(path: PathBuf) -> PathBuf {
    let mut n = 0;
    let mut candidate = path.clone();
    while candidate.exists() {
        n += 1;
        candidate = path.with_extension(format!("{n}.log"));
    }
    candidate
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A fresh identity for a host process with full rights, so its writes can
/// be counted in the audit log apart from everyone else's.
pub async fn admin_identity(env: &TestEnv, user: &str) -> anyhow::Result<(Client, PathBuf)> {
    env.user_kubeconfig(user, &["system:masters"]).await
}

/// JSON value at `pointer` of `obj`.
pub fn at<'a>(obj: &'a DynamicObject, pointer: &str) -> Option<&'a Value> {
    obj.data.pointer(pointer)
}

/// What a tool run as `<tool> <args>` printed (stdout, then stderr), or an
/// error naming the command, its exit status and what it printed unless it
/// exited 0.
pub fn tool_output(
    tool: &str,
    args: &[&str],
    out: &std::process::Output,
) -> anyhow::Result<String> {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    anyhow::ensure!(
        out.status.success(),
        "{tool} {} failed ({}):\n{text}",
        args.join(" "),
        out.status
    );
    Ok(text)
}

/// Creates or replaces a ConfigMap holding `module` under `binaryData[key]`.
pub async fn put_module(
    client: &Client,
    ns: &str,
    name: &str,
    key: &str,
    module: &[u8],
) -> anyhow::Result<()> {
    let binary = [(key.to_string(), k8s_openapi::ByteString(module.to_vec()))].into();
    put_configmap(client, ns, name, None, Some(binary)).await
}

/// Puts the hostile guest's module into the ConfigMap `hostile-module`
/// (key `module.wasm`) in `ns`, where guest lists name it.
pub async fn put_hostile_module(client: &Client, ns: &str) -> anyhow::Result<()> {
    put_module(
        client,
        ns,
        "hostile-module",
        "module.wasm",
        &std::fs::read(guest_module("hostile")?)?,
    )
    .await
}

/// `<stem>=<path>`: the guest built as `<stem>.wasm`, named `<stem>`, as
/// `wasmop run --guest` takes it.
pub fn guest_arg(stem: &str) -> anyhow::Result<String> {
    Ok(format!("{stem}={}", guest_module(stem)?.display()))
}

/// Waits until `user` has stopped writing: the audit log shows no new
/// write of theirs for two seconds (within a minute).
pub async fn writes_settle(env: &TestEnv, user: &str) -> anyhow::Result<()> {
    const QUIET: Duration = Duration::from_secs(2);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = (env.count_writes_by(user)?, Instant::now());
    while last.1.elapsed() < QUIET {
        anyhow::ensure!(
            Instant::now() < deadline,
            "{user} kept writing for a minute ({} writes)",
            last.0
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = env.count_writes_by(user)?;
        if now != last.0 {
            last = (now, Instant::now());
        }
    }
    Ok(())
}

/// Creates or replaces the guest list ConfigMap `name` with `guests_yaml`.
pub async fn put_guest_list(
    client: &Client,
    ns: &str,
    name: &str,
    guests_yaml: &str,
) -> anyhow::Result<()> {
    let data = [("guests.yaml".to_string(), guests_yaml.to_string())].into();
    put_configmap(client, ns, name, Some(data), None).await
}

async fn put_configmap(
    client: &Client,
    ns: &str,
    name: &str,
    data: Option<std::collections::BTreeMap<String, String>>,
    binary_data: Option<std::collections::BTreeMap<String, k8s_openapi::ByteString>>,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data,
        binary_data,
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::apply("wasmop-tests").force(),
            &Patch::Apply(&cm),
        )
        .await?;
    Ok(())
}

/// Reasons of the events.k8s.io Events about `name` in `ns`, with notes.
pub async fn events_about(
    client: &Client,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<(String, String, String)>> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    Ok(api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect())
}

/// Waits for an event with `reason` about `name`, returning its note.
pub async fn wait_for_event(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> anyhow::Result<String> {
    wait_for(timeout, || async {
        let events = events_about(client, ns, name).await?;
        match events.iter().find(|(_, r, _)| r == reason) {
            Some((_, _, note)) => Ok(Some(note.clone())),
            None => bail!("no {reason} event about {name}; events: {events:?}"),
        }
    })
    .await
}

/// Runs `wasmop rbac` for the built guests `stems` (the Role for the guest
/// list in `list_ns`), applies the ClusterRole and Role it prints under the
/// name `wasmop-<tag>`, binds both to a fresh user and returns that user and
/// its kubeconfig: the host's identity in production.
pub async fn least_privilege(
    env: &TestEnv,
    tag: &str,
    list_ns: &str,
    stems: &[&str],
) -> anyhow::Result<(String, PathBuf)> {
    least_privilege_with(env, tag, list_ns, stems, &[]).await
}

/// [`least_privilege`] with more `wasmop rbac` arguments (`--settings`,
/// `--webhook-cert-secret`).
pub async fn least_privilege_with(
    env: &TestEnv,
    tag: &str,
    list_ns: &str,
    stems: &[&str],
    extra: &[&str],
) -> anyhow::Result<(String, PathBuf)> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let name = format!("wasmop-{tag}");
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasmop"));
    command.args(["rbac", "--name", &name, "--namespace", list_ns]);
    command.args(extra);
    for stem in stems {
        command.arg("--guest").arg(guest_module(stem)?);
    }
    let out = command.output()?;
    if !out.status.success() {
        bail!(
            "wasmop rbac failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8(out.stdout)?;
    if text.contains('*') {
        bail!("wasmop rbac printed a wildcard:\n{text}");
    }
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)?;
    let client = env.client();
    let pp = PatchParams::apply("wasmop-tests").force();
    let user = format!("wasmop-least-{tag}");
    let subject = serde_json::json!([{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]);
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let own = doc["metadata"]["name"] == name.as_str();
        match doc["kind"].as_str() {
            // The host's roles, bound to the test's user.
            Some("ClusterRole") if own => {
                let role: ClusterRole = serde_json::from_value(doc)?;
                Api::<ClusterRole>::all(client.clone())
                    .patch(&name, &pp, &Patch::Apply(&role))
                    .await?;
                let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": subject,
                }))?;
                Api::<ClusterRoleBinding>::all(client.clone())
                    .patch(&name, &pp, &Patch::Apply(&binding))
                    .await?;
            }
            Some("Role") if own => {
                let role: Role = serde_json::from_value(doc)?;
                Api::<Role>::namespaced(client.clone(), list_ns)
                    .patch(&name, &pp, &Patch::Apply(&role))
                    .await?;
                let binding: RoleBinding = serde_json::from_value(serde_json::json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": list_ns},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                    "subjects": subject,
                }))?;
                Api::<RoleBinding>::namespaced(client.clone(), list_ns)
                    .patch(&name, &pp, &Patch::Apply(&binding))
                    .await?;
            }
            // The host's own ServiceAccount and its bindings: the test's
            // user is bound above instead.
            Some("ServiceAccount" | "ClusterRoleBinding" | "RoleBinding")
                if own || doc["metadata"]["name"] == "wasmop" => {}
            // With --guest-identity impersonate: each guest's
            // ServiceAccount, roles and bindings, as printed.
            Some(
                "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding",
            ) => {
                apply_as_printed(&client, &doc).await?;
            }
            other => bail!("wasmop rbac printed an unexpected {other:?}"),
        }
    }
    let (_, kubeconfig) = env.user_kubeconfig(&user, &[]).await?;
    Ok((user, kubeconfig))
}

/// Applies one object `wasmop rbac` printed, server-side, as it is.
async fn apply_as_printed(client: &Client, doc: &Value) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(doc.clone())?;
    let gvk = kube::core::GroupVersionKind::try_from(
        object
            .types
            .as_ref()
            .context("a printed object without apiVersion and kind")?,
    )?;
    let resource = kube::core::ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        &object.name_any(),
        &PatchParams::apply("wasmop-tests").force(),
        &Patch::Apply(&object),
    )
    .await?;
    Ok(())
}

/// A write as the audit log names it: `(verb, resource, subresource, name)`.
pub type Write = (String, String, String, String);

/// The writes made as `user` (itself, or impersonated) that the API server
/// carried out (2xx), as
/// `(verb, resource, subresource, name)`: what a refused or failed request
/// never changed is left out.
pub fn successful_writes_by(env: &TestEnv, user: &str) -> anyhow::Result<Vec<Write>> {
    Ok(timed_successful_writes_by(env, user)?
        .into_iter()
        .map(|(_, write)| write)
        .collect())
}

/// [`successful_writes_by`], each with the time the API server received it.
pub fn timed_successful_writes_by(
    env: &TestEnv,
    user: &str,
) -> anyhow::Result<Vec<(k8s_openapi::jiff::Timestamp, Write)>> {
    env.audit_events_of(user)?
        .into_iter()
        // As `user`: a request that impersonated someone is that one's.
        .filter(|e| wasmop_testenv::effective_user(e) == Some(user))
        .filter(|e| {
            e["verb"]
                .as_str()
                .is_some_and(|verb| wasmop_testenv::WRITE_VERBS.contains(&verb))
        })
        .filter(|e| {
            e["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|c| c < 300)
        })
        .map(|e| {
            let received = e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .with_context(|| format!("an audit event without a readable time: {e}"))?;
            let field = |k: &str| e["objectRef"][k].as_str().unwrap_or_default().to_owned();
            Ok((
                received,
                (
                    e["verb"].as_str().unwrap_or_default().to_owned(),
                    field("resource"),
                    field("subresource"),
                    field("name"),
                ),
            ))
        })
        .collect()
}

/// Reconcile spans of `guest` in a host log, in order: `(id, started)` for
/// each "reconcile started" line and `(id, false)` for each line that ends
/// one ("reconciled", "reconcile failed").
pub fn reconcile_spans(log: &str, guest: &str) -> Vec<(u64, bool)> {
    let needle = format!("reconcile{{guest={guest} ");
    log.lines()
        .filter(|l| l.contains(&needle))
        .filter_map(|l| {
            let id = l
                .split(" id=")
                .nth(1)?
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()?;
            if l.ends_with("reconcile started") {
                Some((id, true))
            } else if l.contains(": reconciled") || l.contains("reconcile failed") {
                Some((id, false))
            } else {
                None
            }
        })
        .collect()
}

/// `GET http://<addr><path>`: the status and the body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let url = format!("http://{addr}{path}");
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let mut response = agent.get(&url).call()?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string()?;
        anyhow::Ok((status, body))
    })
    .await?
}

/// The Python `prometheus_client` package (PyPI), installed once into the
/// cache outside the repo: its parser reads our /metrics, so the format is
/// checked by Prometheus' own code, not ours.
fn prometheus_client_dir() -> anyhow::Result<PathBuf> {
    const VERSION: &str = "0.26.0";
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let dir = PathBuf::from(home)
        .join(".cache/wasmop/python")
        .join(format!("prometheus_client-{VERSION}"));
    if dir.join("prometheus_client").is_dir() {
        return Ok(dir);
    }
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    let out = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--no-deps", "--target"])
        .arg(&tmp)
        .arg(format!("prometheus_client=={VERSION}"))
        .output()
        .context("running python3 -m pip (python3 is needed to check /metrics)")?;
    if !out.status.success() {
        bail!(
            "installing prometheus_client {VERSION} from PyPI failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::create_dir_all(dir.parent().context("cache dir")?)?;
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => {}
        // Another test installed it meanwhile.
        Err(_) if dir.join("prometheus_client").is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        Err(e) => return Err(e.into()),
    }
    Ok(dir)
}

/// Parses Prometheus text with the Python client's parser: family name →
/// `{"type": …, "samples": [{"name", "labels", "value"}]}`.
pub fn parse_prometheus(text: &str) -> anyhow::Result<Value> {
    use std::io::Write as _;
    const SCRIPT: &str = r#"import sys, json
from prometheus_client.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    out[f.name] = {'type': f.type, 'samples': [{'name': s.name, 'labels': s.labels, 'value': s.value} for s in f.samples]}
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .env("PYTHONPATH", prometheus_client_dir()?)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(text.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "the Prometheus parser refused /metrics: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The value of the sample `name` whose labels include `labels`, in parsed
/// metrics.
pub fn sample(metrics: &Value, family: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics[family]["samples"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        .and_then(|s| s["value"].as_f64())
}

/// Waits until the Cache `name` is Ready at its generation
/// ([`fleet::is_ready`]) and returns it.
pub async fn wait_ready(client: &Client, ns: &str, name: &str) -> anyhow::Result<DynamicObject> {
    wait_ready_in(client, CACHE_GROUP, ns, name).await
}

/// [`wait_ready`] of a Cache CRD installed under `group`.
pub async fn wait_ready_in(
    client: &Client,
    group: &str,
    ns: &str,
    name: &str,
) -> anyhow::Result<DynamicObject> {
    let api = caches_in(client, group, ns);
    wait_for(Duration::from_secs(90), || async {
        let c = api.get(name).await?;
        Ok(fleet::is_ready(&c).then_some(c))
    })
    .await
    .with_context(|| format!("Cache {name} never became Ready"))
}

/// sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The guest list ConfigMap the webhook hosts follow, in their namespace.
pub const WEBHOOK_LIST: &str = "wasmop-guests";

/// A host following the guest list [`WEBHOOK_LIST`] in `ns`, serving
/// webhooks on a free local port that the API server (on this machine)
/// reaches.
pub async fn webhook_host(env: &TestEnv, ns: &str) -> anyhow::Result<HostProcess> {
    webhook_host_with(env, ns, &[]).await
}

/// [`webhook_host`] with more flags.
pub async fn webhook_host_with(
    env: &TestEnv,
    ns: &str,
    extra: &[&str],
) -> anyhow::Result<HostProcess> {
    let (_, kubeconfig) = admin_identity(env, &format!("wasmop-{ns}")).await?;
    HostProcess::start(
        env,
        &kubeconfig,
        ns,
        &[
            "--guests-configmap",
            &format!("{ns}/{WEBHOOK_LIST}"),
            "--webhook-host",
            "127.0.0.1",
            "--webhook-bind-address",
            "127.0.0.1:0",
        ]
        .into_iter()
        .chain(extra.iter().copied())
        .collect::<Vec<_>>(),
    )
}

/// Runs kubectl as the cluster admin; returns (success, stdout, stderr).
pub fn kubectl(
    env: &TestEnv,
    args: &[&str],
    stdin: Option<&str>,
) -> anyhow::Result<(bool, String, String)> {
    use std::io::Write as _;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl")?;
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .context("stdin")?
            .write_all(input.as_bytes())?;
    }
    drop(child.stdin.take());
    let out = child.wait_with_output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// One Hostile attacking `target` with `attack`; returns its `status.http`.
pub async fn http_attack(
    client: &Client,
    ns: &str,
    name: &str,
    attack: &str,
    target: &str,
) -> anyhow::Result<String> {
    let obj = serde_json::from_value(serde_json::json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
        "metadata": {"name": name}, "spec": {"attack": attack, "target": target},
    }))?;
    let api = hostiles(client, ns);
    api.create(&kube::api::PostParams::default(), &obj).await?;
    wait_for(Duration::from_secs(120), || async {
        let h = api.get(name).await?;
        Ok(at(&h, "/status/http")
            .and_then(|v| v.as_str())
            .map(str::to_owned))
    })
    .await
    .with_context(|| format!("Hostile {name} reported no status.http"))
}
