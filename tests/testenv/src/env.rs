//! [`TestEnv`]: one running control plane.

use std::collections::HashMap;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::audit;
use crate::binaries::{Binaries, ensure_binaries};
use crate::pki::{self, Pki};
use crate::process::{self, Component, Spawner};

/// How long each start-up phase may take. A warm start takes a few seconds on
/// 2 cores; the slack is for a loaded CI machine.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// How long [`TestEnv::create_namespace`] waits for the namespace's `default`
/// ServiceAccount (made by kube-controller-manager; Pods are refused without it).
const SERVICE_ACCOUNT_TIMEOUT: Duration = Duration::from_secs(30);

/// Name of the fake node kwok plays the kubelet for.
pub const NODE_NAME: &str = "kwok-node-0";

/// The controllers kube-controller-manager runs: what operators and their
/// tests lean on. Left out on purpose: the node lifecycle controller (it
/// would taint the fake node NotReady whenever kwok's heartbeat is late),
/// volume controllers, certificate signing and everything cloud.
const CONTROLLERS: &str = "garbage-collector-controller,namespace-controller,\
serviceaccount-controller,serviceaccount-token-controller,\
root-ca-certificate-publisher-controller,clusterrole-aggregation-controller,\
deployment-controller,replicaset-controller,statefulset-controller,\
daemonset-controller,job-controller,cronjob-controller,endpointslice-controller";

/// Set to `1` to keep the temporary directory (logs, certificates, etcd data,
/// audit log) after the control plane stops; its path is printed.
const KEEP_ENV: &str = "WASMOP_KEEP_TESTENV";

/// A running Kubernetes control plane: etcd, kube-apiserver,
/// kube-controller-manager, kube-scheduler and kwok, each a child process
/// listening on 127.0.0.1, with one fake node ([`NODE_NAME`]) whose Pods kwok
/// marks Running and Ready.
///
/// Dropping it (also while a panic unwinds) kills every process it started
/// and deletes its temporary directory. The children also get SIGKILL from
/// the kernel if this process dies without unwinding.
pub struct TestEnv {
    pub(crate) client: kube::Client,
    kubeconfig: PathBuf,
    api_server_url: String,
    /// etcd's client URL, `http://127.0.0.1:<port>`.
    pub(crate) etcd_url: String,
    temp_dir: PathBuf,
    audit_log: PathBuf,
    /// Where the reading of each string's audit events stopped
    /// ([`TestEnv::audit_events_of`]).
    audit_cursors: Mutex<HashMap<String, Arc<Mutex<audit::Cursor>>>>,
    pki: Pki,
    startup_time: Duration,
    /// Makes namespace and kubeconfig names unique.
    next_suffix: AtomicU64,
    pub(crate) plane: Mutex<Plane>,
}

impl TestEnv {
    /// Starts a control plane and waits until it is ready: the API server
    /// answers `/readyz`, the fake node is Ready, and kube-controller-manager
    /// has created the `default` ServiceAccount.
    ///
    /// Finds or builds the binaries first ([`ensure_binaries`]; a first build
    /// takes many minutes). On failure, the tail of each component's log is
    /// printed to stderr and everything started is removed.
    pub async fn start() -> Result<TestEnv> {
        let binaries = tokio::task::spawn_blocking(ensure_binaries)
            .await
            .context("the binary lookup panicked")??;
        // A port we picked can be taken by someone else before the component
        // binds it; then start over with fresh ports.
        let mut attempt = 1;
        loop {
            match start_once(&binaries).await {
                Ok(env) => return Ok(env),
                Err(failure) if failure.port_clash && attempt < 3 => {
                    eprintln!("testenv: a port was taken while starting; retrying with new ports");
                    attempt += 1;
                }
                Err(failure) => return Err(failure.error),
            }
        }
    }

    /// A client authenticated as the admin user `wasmop-admin` (group
    /// `system:masters`, so RBAC allows everything).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The admin kubeconfig file (certificates inline), e.g. for a process
    /// under test or for `kubectl`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// A client and a kubeconfig file for any identity: a fresh client
    /// certificate with Common Name `user` and Organization `groups` (at most
    /// two), which kube-apiserver authenticates as that user in those groups
    /// (plus `system:authenticated`). RBAC applies: beyond discovery the user
    /// may do nothing until a test binds it a role.
    pub async fn user_kubeconfig(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<(kube::Client, PathBuf)> {
        let pair = self.pki.client_cert(user, groups)?;
        // Nothing the log holds yet is this user's request (it had no
        // certificate): reading its events starts here.
        let written = fs::metadata(&self.audit_log).map_or(0, |m| m.len());
        self.audit_cursors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(user.to_owned())
            .or_insert_with(|| Arc::new(Mutex::new(audit::Cursor::at(written))));
        let dir = self.temp_dir.join("users");
        fs::create_dir_all(&dir)?;
        let file_name: String = user
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let n = self.next_suffix.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{file_name}-{n}.kubeconfig"));
        pki::write_kubeconfig(&path, &self.api_server_url, self.pki.ca_cert(), &pair, user)?;
        let client = client_from(&path).await?;
        Ok((client, path))
    }

    /// Creates a namespace named `<prefix>-<n>`, unique in this control
    /// plane, and waits until its `default` ServiceAccount exists (without it
    /// the API server refuses Pods). `prefix` is lower-cased and cut to fit.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String> {
        let mut prefix: String = prefix
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        prefix.truncate(48);
        let prefix = prefix.trim_matches('-');
        let prefix = if prefix.is_empty() { "test" } else { prefix };

        let namespaces: Api<Namespace> = Api::all(self.client());
        let name = loop {
            let n = self.next_suffix.fetch_add(1, Ordering::Relaxed);
            let name = format!("{prefix}-{n}");
            let namespace = Namespace {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            };
            match namespaces.create(&PostParams::default(), &namespace).await {
                Ok(_) => break name,
                Err(kube::Error::Api(status)) if status.is_already_exists() => {}
                Err(err) => return Err(err).with_context(|| format!("creating namespace {name}")),
            }
        };

        let accounts: Api<ServiceAccount> = Api::namespaced(self.client(), &name);
        let deadline = Instant::now() + SERVICE_ACCOUNT_TIMEOUT;
        while accounts.get_opt("default").await?.is_none() {
            if Instant::now() > deadline {
                bail!(
                    "namespace {name}: no default ServiceAccount after {SERVICE_ACCOUNT_TIMEOUT:?}; \
                     is kube-controller-manager running?\n{}",
                    self.diagnostics()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(name)
    }

    /// Every audit event of stage `ResponseComplete` logged so far, oldest
    /// first: one per request, at level Metadata (see `audit-policy.yaml`).
    ///
    /// The API server writes an event just after it sends the response, so a
    /// request made a moment ago may not be in the log yet: poll, or wait a
    /// second, before asserting that something is absent.
    pub fn audit_events(&self) -> Result<Vec<serde_json::Value>> {
        audit::read_events(&self.audit_log)
    }

    /// The audit events that name `user` (as the authenticated or the
    /// impersonated user, or anywhere else as a JSON string): a superset of
    /// `user`'s requests, read much faster than [`TestEnv::audit_events`]
    /// from a large log. For a user of [`TestEnv::user_kubeconfig`], the
    /// events from its certificate on. The timing caveat of
    /// [`TestEnv::audit_events`] applies.
    ///
    /// Each call reads only what the log gained since the last call for
    /// `user`: the tests of a binary share one log, which grows to hundreds
    /// of megabytes, and poll it.
    pub fn audit_events_of(&self, user: &str) -> Result<Vec<serde_json::Value>> {
        let cursor = Arc::clone(
            self.audit_cursors
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(user.to_owned())
                .or_insert_with(|| Arc::new(Mutex::new(audit::Cursor::at(0)))),
        );
        let mut cursor = cursor.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(cursor.advance(&self.audit_log, Some(user))?.to_vec())
    }

    /// How many write requests (verbs create, update, patch, delete,
    /// deletecollection) `user` has made, counting refused ones too: a
    /// request the API server denied was still an attempt to write. When a
    /// request impersonated someone, it counts for the impersonated user.
    /// The timing caveat of [`TestEnv::audit_events`] applies.
    pub fn count_writes_by(&self, user: &str) -> Result<usize> {
        Ok(audit::count_writes_by(&self.audit_events_of(user)?, user))
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn api_server_url(&self) -> &str {
        &self.api_server_url
    }

    /// The directory holding this control plane's certificates, kubeconfigs,
    /// logs (`<component>.log`), audit log and etcd data. Deleted on drop
    /// unless `WASMOP_KEEP_TESTENV=1`.
    pub fn temp_dir(&self) -> &Path {
        &self.temp_dir
    }

    /// How long [`TestEnv::start`] took from launching etcd to ready (a build
    /// of the binaries not included).
    pub fn startup_time(&self) -> Duration {
        self.startup_time
    }

    /// Each component's state (running, or how it exited) and the last lines
    /// of its log: what to print when a test fails for reasons that may lie
    /// in the control plane.
    pub fn diagnostics(&self) -> String {
        let mut plane = self.plane.lock().unwrap_or_else(PoisonError::into_inner);
        plane.report(20)
    }

    /// The name and process id of every component that still runs (for a
    /// bench that reads their CPU time from `/proc`).
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        let mut plane = self.plane.lock().unwrap_or_else(PoisonError::into_inner);
        plane
            .components
            .iter_mut()
            .filter_map(|c| c.exited().is_none().then(|| (c.name, c.pid())))
            .collect()
    }

    /// Kills every process and removes the temporary directory now. Dropping
    /// the `TestEnv` does the same; this is for an owner that shares it
    /// (`Arc`) and must stop it at a set point. Idempotent; afterwards every
    /// request fails.
    pub fn shutdown(&self) {
        self.plane
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .shutdown();
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("api_server_url", &self.api_server_url)
            .field("temp_dir", &self.temp_dir)
            .field("startup_time", &self.startup_time)
            .finish_non_exhaustive()
    }
}

/// The processes and directory of one control plane; killing and removing
/// them is idempotent and also happens on drop.
pub(crate) struct Plane {
    pub(crate) components: Vec<Component>,
    spawner: Option<Spawner>,
    dir: Option<tempfile::TempDir>,
}

impl Plane {
    /// Kills component `name` if it runs and starts it again with the same
    /// command line, log and (for etcd) data directory.
    pub(crate) fn restart(&mut self, name: &str) -> Result<()> {
        let spawner = self
            .spawner
            .as_ref()
            .context("the control plane is shutting down")?;
        let component = self
            .components
            .iter_mut()
            .find(|c| c.name == name)
            .with_context(|| format!("no component {name}"))?;
        component.kill();
        let fresh = spawner.spawn(
            component.name,
            &component.program,
            &component.args,
            component.log.clone(),
        )?;
        *component = fresh;
        Ok(())
    }

    /// Component `name`.
    pub(crate) fn component(&mut self, name: &str) -> Result<&mut Component> {
        self.components
            .iter_mut()
            .find(|c| c.name == name)
            .with_context(|| format!("no component {name}"))
    }

    fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |dir| dir.path())
    }

    /// Fails if any component has exited.
    fn check_alive(&mut self) -> Result<()> {
        for component in &mut self.components {
            if let Some(status) = component.exited() {
                bail!("{} exited ({status})", component.name);
            }
        }
        Ok(())
    }

    fn port_clash(&mut self) -> bool {
        self.components.iter_mut().any(|component| {
            component.exited().is_some() && process::log_mentions_port_clash(&component.log)
        })
    }

    fn report(&mut self, lines: usize) -> String {
        let mut out = String::new();
        for component in &mut self.components {
            let state = match component.exited() {
                Some(status) => format!("exited ({status})"),
                None => "running".to_owned(),
            };
            out.push_str(&format!(
                "--- {} ({state}), last lines of {}:\n",
                component.name,
                component.log.display()
            ));
            out.push_str(&component.log_tail(lines));
        }
        out
    }

    fn shutdown(&mut self) {
        // Dependents first, etcd last, so nothing logs a storm of connection
        // errors on the way down.
        for component in self.components.iter_mut().rev() {
            component.kill();
        }
        self.spawner.take();
        if let Some(dir) = self.dir.take()
            && std::env::var_os(KEEP_ENV).is_some_and(|value| value == "1")
        {
            eprintln!("testenv: {KEEP_ENV}=1, keeping {}", dir.keep().display());
        }
    }
}

impl Drop for Plane {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct StartFailure {
    error: anyhow::Error,
    port_clash: bool,
}

/// Files and ports of one start attempt.
struct Layout {
    dir: PathBuf,
    etcd_port: u16,
    api_port: u16,
    url: String,
}

impl Layout {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn arg(&self, flag: &str, name: &str) -> String {
        format!("--{flag}={}", self.file(name).display())
    }
}

async fn start_once(binaries: &Binaries) -> Result<TestEnv, StartFailure> {
    let fail = |error: anyhow::Error| StartFailure {
        error,
        port_clash: false,
    };
    let dir = tempfile::Builder::new()
        .prefix("wasmop-testenv-")
        .tempdir()
        .context("creating the temporary directory")
        .map_err(fail)?;
    let mut plane = Plane {
        components: Vec::new(),
        spawner: Some(Spawner::new().map_err(fail)?),
        dir: Some(dir),
    };
    let started = Instant::now();
    match boot(&mut plane, binaries).await {
        Ok((layout, pki, client)) => {
            let startup_time = started.elapsed();
            eprintln!(
                "testenv: control plane ready in {:.1}s at {} (files in {})",
                startup_time.as_secs_f64(),
                layout.url,
                layout.dir.display()
            );
            Ok(TestEnv {
                client,
                kubeconfig: layout.file("admin.kubeconfig"),
                api_server_url: layout.url.clone(),
                etcd_url: format!("http://127.0.0.1:{}", layout.etcd_port),
                audit_log: layout.file("audit.log"),
                audit_cursors: Mutex::default(),
                temp_dir: layout.dir,
                pki,
                startup_time,
                next_suffix: AtomicU64::new(1),
                plane: Mutex::new(plane),
            })
        }
        Err(error) => {
            let port_clash = plane.port_clash();
            eprintln!(
                "testenv: the control plane did not start: {error:#}\n{}\
                 (the logs are deleted now; set {KEEP_ENV}=1 to keep them)",
                plane.report(30)
            );
            Err(StartFailure { error, port_clash })
        }
    }
}

/// Writes the files, starts the five components and waits until they work.
async fn boot(plane: &mut Plane, binaries: &Binaries) -> Result<(Layout, Pki, kube::Client)> {
    let [etcd_port, api_port] = free_ports()?;
    let layout = Layout {
        dir: plane.path().to_owned(),
        etcd_port,
        api_port,
        url: format!("https://127.0.0.1:{api_port}"),
    };
    let pki = write_files(&layout)?;

    let etcd = format!("http://127.0.0.1:{}", layout.etcd_port);
    start(
        plane,
        "etcd",
        &binaries.etcd,
        &layout,
        vec![
            layout.arg("data-dir", "etcd"),
            format!("--listen-client-urls={etcd}"),
            format!("--advertise-client-urls={etcd}"),
            // No peers: let the kernel pick the peer port so it cannot clash.
            "--listen-peer-urls=http://127.0.0.1:0".to_owned(),
            // Test data need not survive a power cut; fsync would dominate.
            "--unsafe-no-fsync".to_owned(),
            "--log-level=warn".to_owned(),
        ],
    )?;
    start(
        plane,
        "kube-apiserver",
        &binaries.kube_apiserver,
        &layout,
        vec![
            format!("--etcd-servers={etcd}"),
            format!("--secure-port={}", layout.api_port),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            layout.arg("cert-dir", "apiserver-certs"),
            layout.arg("tls-cert-file", "apiserver.crt"),
            layout.arg("tls-private-key-file", "apiserver.key"),
            layout.arg("client-ca-file", "ca.crt"),
            "--authorization-mode=RBAC".to_owned(),
            // Room for the scale bench's 5,000 Services and more.
            "--service-cluster-ip-range=10.0.0.0/16".to_owned(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            layout.arg("service-account-key-file", "sa.pub"),
            layout.arg("service-account-signing-key-file", "sa.key"),
            "--allow-privileged=true".to_owned(),
            // This plugin taints every new node `not-ready:NoSchedule` until the
            // node lifecycle controller sees it Ready; we do not run that
            // controller (see CONTROLLERS), so the taint would stay forever.
            "--disable-admission-plugins=TaintNodesByCondition".to_owned(),
            // The `kubernetes` Service would get 127.0.0.1 as endpoint, which
            // Endpoints validation refuses; nothing here needs it.
            "--endpoint-reconciler-type=none".to_owned(),
            layout.arg("audit-policy-file", "audit-policy.yaml"),
            layout.arg("audit-log-path", "audit.log"),
            "--audit-log-format=json".to_owned(),
            // The log is read whole by the tests' oracles; the default
            // rotates it at 100 MB, which a long suite reaches, and the
            // oracle would then see a nearly empty file.
            "--audit-log-maxsize=1000000".to_owned(),
            "--audit-log-mode=blocking".to_owned(),
            "--profiling=false".to_owned(),
        ],
    )?;

    let client = client_from(&layout.file("admin.kubeconfig")).await?;
    let admin = &client;
    wait_for(plane, "kube-apiserver /readyz", || async move {
        let request = http::Request::get("/readyz").body(Vec::new())?;
        Ok(admin
            .request_text(request)
            .await
            .is_ok_and(|body| body.trim() == "ok"))
    })
    .await?;

    create_fake_node(&client).await?;
    start(
        plane,
        "kube-controller-manager",
        &binaries.kube_controller_manager,
        &layout,
        vec![
            layout.arg("kubeconfig", "kube-controller-manager.kubeconfig"),
            "--leader-elect=false".to_owned(),
            // 0: serve no HTTPS (nothing scrapes it), so no port to pick.
            "--secure-port=0".to_owned(),
            format!("--controllers={CONTROLLERS}"),
            layout.arg("service-account-private-key-file", "sa.key"),
            layout.arg("root-ca-file", "ca.crt"),
            // One identity per controller, as in a real cluster, so the audit log
            // tells the deployment controller from the garbage collector.
            "--use-service-account-credentials=true".to_owned(),
            // Client-side rate limits sized for hundreds of Deployments
            // at once (the defaults, 20 QPS, burst 30, are a small cluster's).
            "--kube-api-qps=200".to_owned(),
            "--kube-api-burst=400".to_owned(),
            "--concurrent-deployment-syncs=10".to_owned(),
            "--concurrent-replicaset-syncs=10".to_owned(),
        ],
    )?;
    start(
        plane,
        "kube-scheduler",
        &binaries.kube_scheduler,
        &layout,
        vec![
            layout.arg("kubeconfig", "kube-scheduler.kubeconfig"),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
            // Binding thousands of Pods: the defaults (50 QPS, burst 100)
            // would make the scheduler what a scale bench measures.
            "--kube-api-qps=200".to_owned(),
            "--kube-api-burst=400".to_owned(),
        ],
    )?;
    start(
        plane,
        "kwok",
        &binaries.kwok,
        &layout,
        vec![
            layout.arg("kubeconfig", "kwok.kubeconfig"),
            layout.arg("config", "kwok.yaml"),
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".to_owned(),
        ],
    )?;

    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = &nodes;
    wait_for(
        plane,
        "the fake node to be Ready and untainted (kwok)",
        || async move {
            Ok(nodes
                .get_opt(NODE_NAME)
                .await?
                .is_some_and(|node| node_is_ready(&node)))
        },
    )
    .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let accounts = &accounts;
    wait_for(
        plane,
        "the default ServiceAccount (kube-controller-manager)",
        || async move { Ok(accounts.get_opt("default").await?.is_some()) },
    )
    .await?;
    plane.check_alive()?;
    Ok((layout, pki, client))
}

fn start(
    plane: &mut Plane,
    name: &'static str,
    program: &Path,
    layout: &Layout,
    args: Vec<String>,
) -> Result<()> {
    let spawner = plane
        .spawner
        .as_ref()
        .context("the control plane is shutting down")?;
    let component = spawner.spawn(name, program, &args, layout.file(&format!("{name}.log")))?;
    plane.components.push(component);
    Ok(())
}

/// Polls `ready` until it says yes, failing early if a component exits.
async fn wait_for<F, Fut>(plane: &mut Plane, what: &str, mut ready: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut last_error = None;
    loop {
        plane
            .check_alive()
            .with_context(|| format!("waiting for {what}"))?;
        match ready().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(err) => last_error = Some(err),
        }
        if Instant::now() > deadline {
            let last = last_error
                .map(|err| format!(" (last error: {err:#})"))
                .unwrap_or_default();
            bail!("timed out after {READY_TIMEOUT:?} waiting for {what}{last}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Two distinct free ports on 127.0.0.1 (both listeners are held until both
/// are known, so they differ).
fn free_ports() -> Result<[u16; 2]> {
    let first = TcpListener::bind("127.0.0.1:0")?;
    let second = TcpListener::bind("127.0.0.1:0")?;
    Ok([first.local_addr()?.port(), second.local_addr()?.port()])
}

/// Writes certificates, keys, kubeconfigs, the audit policy and kwok's stages.
fn write_files(layout: &Layout) -> Result<Pki> {
    let pki = Pki::new()?;
    fs::write(layout.file("ca.crt"), pki.ca_cert())?;
    let serving = pki.serving_cert()?;
    fs::write(layout.file("apiserver.crt"), &serving.cert)?;
    fs::write(layout.file("apiserver.key"), &serving.key)?;
    let (sa_key, sa_pub) = pki::service_account_keys()?;
    fs::write(layout.file("sa.key"), sa_key)?;
    fs::write(layout.file("sa.pub"), sa_pub)?;

    // Each component its own identity. kube-controller-manager and
    // kube-scheduler get the names the bootstrap RBAC policy grants their
    // permissions to; kwok edits node and pod status, for which no bootstrap
    // role exists, so it is an admin.
    let identities: [(&str, &str, &[&str]); 4] = [
        ("admin.kubeconfig", "wasmop-admin", &["system:masters"]),
        (
            "kube-controller-manager.kubeconfig",
            "system:kube-controller-manager",
            &[],
        ),
        ("kube-scheduler.kubeconfig", "system:kube-scheduler", &[]),
        ("kwok.kubeconfig", "kwok-controller", &["system:masters"]),
    ];
    for (file, user, groups) in identities {
        let pair = pki.client_cert(user, groups)?;
        pki::write_kubeconfig(&layout.file(file), &layout.url, pki.ca_cert(), &pair, user)?;
    }

    fs::write(
        layout.file("audit-policy.yaml"),
        include_str!("audit-policy.yaml"),
    )?;
    fs::write(layout.file("kwok.yaml"), include_str!("kwok-stages.yaml"))?;
    Ok(pki)
}

async fn client_from(kubeconfig: &Path) -> Result<kube::Client> {
    let config = Kubeconfig::read_from(kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default()).await?;
    kube::Client::try_from(config)
        .map_err(|err| anyhow!("building a client from {}: {err}", kubeconfig.display()))
}

/// Registers the fake node; kwok (which manages nodes annotated
/// `kwok.x-k8s.io/node: fake`) then reports it Ready.
async fn create_fake_node(client: &kube::Client) -> Result<()> {
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "annotations": { "kwok.x-k8s.io/node": "fake" },
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        // kwok gives Pods IPs from the node's podCIDR (a /16: 65k Pods)
        // instead of its default /24.
        "spec": { "podCIDR": "10.128.0.0/16", "podCIDRs": ["10.128.0.0/16"] },
        "status": {
            // Room for the fault suite's and the scale bench's thousands of
            // Pods.
            "capacity": { "cpu": "10000", "memory": "64Ti", "pods": "12000" },
            "allocatable": { "cpu": "10000", "memory": "64Ti", "pods": "12000" },
        },
    }))?;
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .context("creating the fake node")?;
    Ok(())
}

/// Ready, and no taint keeps Pods off it.
fn node_is_ready(node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
    let untainted = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .is_none_or(|taints| {
            taints
                .iter()
                .all(|taint| taint.effect == "PreferNoSchedule")
        });
    ready && untainted
}
