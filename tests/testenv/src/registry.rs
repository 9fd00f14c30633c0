//! A real OCI registry for tests of the OCI module source: the CNCF
//! distribution registry, built from `tests/registry` (a Go module of ours
//! that pins it, and whose `main.go` is distribution's registry command
//! with only the in-memory and filesystem storage drivers and htpasswd
//! authentication) the way the control plane is, and only when a test asks
//! for one.
//!
//! [`Registry::start`] runs it on a free port of 127.0.0.1 with in-memory
//! storage, over plain HTTP, optionally behind HTTP basic auth (an htpasswd
//! file with one bcrypt entry). [`Registry::stop`] and [`Registry::start_again`]
//! are its fault controls: it comes back on the same port, empty.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::gobuild::{GoBuild, prebuilt};
use crate::process::{Component, Spawner};

/// The distribution release `tests/registry/go.mod` pins.
pub const REGISTRY_VERSION: &str = "v3.1.2";

/// Measured on this project's 2-core machines: 45 s with an empty Go build
/// cache (`tests/registry/main.go` leaves out the cloud storage drivers;
/// distribution's own `cmd/registry` took 81 s there).
const COLD_BUILD_MINUTES: &str = "1";

/// How long the registry may take to answer `/v2/`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The `tests/registry` Go module and its one binary.
fn registry_build() -> GoBuild {
    GoBuild {
        name: "registry",
        module: Path::new(env!("CARGO_MANIFEST_DIR")).join("../registry"),
        packages: &["."],
        outputs: &["registry"],
        renames: &[],
        ldflags: "-s -w".to_owned(),
        tags: "",
        cold_build_minutes: COLD_BUILD_MINUTES,
    }
}

/// The registry binary, built first if it is missing (`TEST_ASSET_REGISTRY`
/// names a prebuilt one instead).
pub fn ensure_registry_binary() -> Result<PathBuf> {
    if let Some(path) = prebuilt("TEST_ASSET_REGISTRY")? {
        return Ok(path);
    }
    Ok(registry_build().ensure()?.join("registry"))
}

/// Credentials a registry demands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BasicAuth {
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
}

/// A running registry (killed on drop).
pub struct Registry {
    component: Component,
    spawner: Spawner,
    address: String,
    auth: Option<BasicAuth>,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry with in-memory storage; with `auth`, every request
    /// needs those credentials.
    pub async fn start(auth: Option<BasicAuth>) -> Result<Registry> {
        // A first build takes minutes: not on an async worker thread.
        let program = tokio::task::spawn_blocking(ensure_registry_binary).await??;
        let dir = tempfile::Builder::new()
            .prefix("wasmop-registry-")
            .tempdir()?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let address = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: false\n\
             storage:\n  inmemory: {{}}\n  delete:\n    enabled: true\n\
             http:\n  addr: {address}\n"
        );
        if let Some(auth) = &auth {
            let hash = bcrypt::hash(&auth.password, 4).context("hashing the test password")?;
            let htpasswd = dir.path().join("htpasswd");
            fs::write(&htpasswd, format!("{}:{hash}\n", auth.username))?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: wasmop-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        fs::write(&config_path, config)?;
        let spawner = Spawner::new()?;
        let component = spawner.spawn(
            "registry",
            &program,
            &["serve".to_owned(), config_path.display().to_string()],
            dir.path().join("registry.log"),
        )?;
        let mut registry = Registry {
            component,
            spawner,
            address,
            auth,
            _dir: dir,
        };
        registry.wait_until_ready().await?;
        Ok(registry)
    }

    /// `127.0.0.1:<port>`: the registry part of a reference.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// How many `GET` requests for `path` (e.g.
    /// `/v2/ops/cache-operator/blobs/sha256:…`) its access log shows since
    /// it started, a restart included.
    pub fn gets(&self, path: &str) -> Result<usize> {
        let needle = format!("\"GET {path} HTTP/");
        let log = fs::read_to_string(&self.component.log)
            .with_context(|| format!("reading {}", self.component.log.display()))?;
        Ok(log.lines().filter(|line| line.contains(&needle)).count())
    }

    /// The credentials it demands, if any.
    pub fn auth(&self) -> Option<&BasicAuth> {
        self.auth.as_ref()
    }

    /// Kills the registry (SIGKILL); what it stored is gone.
    pub fn stop(&mut self) {
        self.component.kill();
    }

    /// Starts it again on the same port with the same configuration, empty,
    /// and waits until it answers.
    pub async fn start_again(&mut self) -> Result<()> {
        self.component.kill();
        self.component = self.spawner.spawn(
            self.component.name,
            &self.component.program,
            &self.component.args,
            self.component.log.clone(),
        )?;
        self.wait_until_ready().await
    }

    async fn wait_until_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let url = format!("http://{}/v2/", self.address);
        loop {
            if let Some(status) = self.component.exited() {
                bail!(
                    "the registry exited ({status}):\n{}",
                    self.component.log_tail(20)
                );
            }
            let probe = url.clone();
            let answered = tokio::task::spawn_blocking(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(2)))
                    .build()
                    .into();
                agent.get(&probe).call().map(|r| r.status().as_u16()).ok()
            })
            .await?;
            // 401 is an answer too: the registry demands credentials.
            if matches!(answered, Some(200 | 401)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the registry did not answer {url} within {READY_TIMEOUT:?}:\n{}",
                    self.component.log_tail(20)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.component.kill();
    }
}
