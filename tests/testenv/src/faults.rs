//! Faults a test injects into its own control plane: the components are
//! real processes, so a fault is a real signal or a real etcd request, and
//! what the code under test sees is what it would see in a cluster.
//!
//! - [`TestEnv::kill`] and [`TestEnv::restart`]: SIGKILL a component, start
//!   it again with its first command line (same port, certificates, etcd
//!   data directory, log);
//! - [`TestEnv::pause`] and [`TestEnv::resume`]: SIGSTOP and SIGCONT (a
//!   paused kube-apiserver accepts connections and answers nothing);
//! - [`TestEnv::compact_etcd`]: compacts etcd's history up to its current
//!   revision, so a watch or list from an older resourceVersion gets
//!   `410 Gone` once it has to go to etcd.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rustix::process::Signal;

use crate::TestEnv;

/// How long [`TestEnv::restart`] waits for a component to serve again.
const RESTART_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a paused component may take to stop.
const PAUSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A control-plane component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// etcd: the API server's storage.
    Etcd,
    /// kube-apiserver.
    KubeApiserver,
    /// kube-controller-manager (garbage collection, Deployments, ...).
    KubeControllerManager,
    /// kube-scheduler.
    KubeScheduler,
    /// kwok, the fake kubelet.
    Kwok,
}

impl Component {
    /// Its process name, as in its log file `<name>.log`.
    pub fn name(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::KubeApiserver => "kube-apiserver",
            Component::KubeControllerManager => "kube-controller-manager",
            Component::KubeScheduler => "kube-scheduler",
            Component::Kwok => "kwok",
        }
    }
}

impl TestEnv {
    /// Kills `component` with SIGKILL and reaps it.
    pub fn kill(&self, component: Component) -> Result<()> {
        self.plane().component(component.name())?.kill();
        Ok(())
    }

    /// Starts `component` again with the command line it first ran with
    /// (killing it first if it still runs) and waits until it serves: etcd
    /// answers `/health`, kube-apiserver `/readyz`; the other components are
    /// only started. Returns the moment it answered.
    pub async fn restart(&self, component: Component) -> Result<Instant> {
        self.plane().restart(component.name())?;
        match component {
            Component::Etcd => self.wait_until_etcd_healthy().await,
            Component::KubeApiserver => self.wait_until_ready().await,
            _ => Ok(Instant::now()),
        }
    }

    /// Lets the fake kubelets catch up after a control-plane fault. kwok
    /// drops a stage whose patch failed while the control plane was down
    /// (a Pod stays Pending, its Deployment never available) and never
    /// plays it again, where a kubelet would retry; restarted, it plays
    /// every Pod's stages again.
    pub async fn kubelets_catch_up(&self) -> Result<()> {
        self.restart(Component::Kwok).await.map(drop)
    }

    /// Stops `component` with SIGSTOP: it keeps its sockets and answers
    /// nothing until [`TestEnv::resume`]. Returns once every thread of it
    /// is stopped.
    pub fn pause(&self, component: Component) -> Result<()> {
        let mut plane = self.plane();
        let process = plane.component(component.name())?;
        process.signal(Signal::STOP)?;
        let deadline = Instant::now() + PAUSE_TIMEOUT;
        while !process.stopped() {
            if Instant::now() > deadline {
                bail!(
                    "{} not stopped {PAUSE_TIMEOUT:?} after SIGSTOP",
                    component.name()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Continues a paused `component` (SIGCONT).
    pub fn resume(&self, component: Component) -> Result<()> {
        self.plane()
            .component(component.name())?
            .signal(Signal::CONT)
    }

    /// Waits until kube-apiserver answers `/readyz` with `ok`; returns the
    /// moment it did.
    pub async fn wait_until_ready(&self) -> Result<Instant> {
        let deadline = Instant::now() + RESTART_TIMEOUT;
        loop {
            let request = http::Request::get("/readyz").body(Vec::new())?;
            if let Ok(Ok(body)) =
                tokio::time::timeout(Duration::from_secs(2), self.client.request_text(request))
                    .await
                && body.trim() == "ok"
            {
                return Ok(Instant::now());
            }
            self.fail_if_exited("kube-apiserver")?;
            if Instant::now() > deadline {
                bail!("kube-apiserver not ready {RESTART_TIMEOUT:?} after its restart");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Compacts etcd's key-value history up to its current revision
    /// (through etcd's own JSON gateway, `/v3/kv/compaction`, physical) and
    /// returns that revision.
    pub async fn compact_etcd(&self) -> Result<i64> {
        let url = self.etcd_url.clone();
        tokio::task::spawn_blocking(move || {
            // Any range answers with the store's current revision.
            let range = post(&url, "/v3/kv/range", &serde_json::json!({"key": "AA==", "limit": 1}))?;
            let revision: i64 = range["header"]["revision"]
                .as_str()
                .context("no header.revision in etcd's range answer")?
                .parse()?;
            post(
                &url,
                "/v3/kv/compaction",
                &serde_json::json!({"revision": revision.to_string(), "physical": true}),
            )?;
            // etcd itself now refuses the revision before.
            let before = serde_json::json!({"key": "AA==", "limit": 1, "revision": (revision - 1).to_string()});
            match post(&url, "/v3/kv/range", &before) {
                Err(e) if format!("{e:#}").contains("compacted") => Ok(revision),
                other => bail!("etcd still serves revision {} after compacting at {revision}: {other:?}", revision - 1),
            }
        })
        .await
        .context("the compaction request panicked")?
    }

    async fn wait_until_etcd_healthy(&self) -> Result<Instant> {
        let deadline = Instant::now() + RESTART_TIMEOUT;
        loop {
            let url = format!("{}/health", self.etcd_url);
            let healthy = tokio::task::spawn_blocking(move || {
                ureq::get(&url)
                    .call()
                    .ok()
                    .and_then(|mut r| r.body_mut().read_json::<serde_json::Value>().ok())
                    .is_some_and(|body| body["health"] == "true")
            })
            .await
            .unwrap_or(false);
            if healthy {
                return Ok(Instant::now());
            }
            self.fail_if_exited("etcd")?;
            if Instant::now() > deadline {
                bail!("etcd not healthy {RESTART_TIMEOUT:?} after its restart");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn fail_if_exited(&self, name: &str) -> Result<()> {
        let mut plane = self.plane();
        let component = plane.component(name)?;
        if let Some(status) = component.exited() {
            bail!(
                "{name} exited ({status}) after its restart:\n{}",
                component.log_tail(20)
            );
        }
        Ok(())
    }

    fn plane(&self) -> std::sync::MutexGuard<'_, crate::env::Plane> {
        self.plane
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// POSTs `body` to etcd's JSON gateway; its answer.
fn post(url: &str, path: &str, body: &serde_json::Value) -> Result<serde_json::Value> {
    let mut response = ureq::post(&format!("{url}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .send_json(body)
        .with_context(|| format!("etcd {path}"))?;
    let status = response.status();
    let answer: serde_json::Value = response.body_mut().read_json()?;
    if !status.is_success() {
        bail!("etcd {path}: {status}: {answer}");
    }
    Ok(answer)
}
