//! The host process `wasmop run` starts: a [`Config`], made from the flags
//! and checked before anything talks to the cluster, and the [`App`] it
//! starts: the API clients and the elections, the runtime, the endpoints
//! (metrics, probes, webhooks) and the host with its guests, which follows
//! the guest list until SIGTERM and then shuts down gracefully.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::client::{Clients, GuestIdentity};
use crate::host::{GuestSpec, Host};
use crate::leader::units::Units;
use crate::leader::{Elector, LeaderConfig, Leadership};
use crate::protected::{ProtectedObjects, ProtectedRef};
use crate::runtime::{CompileLimits, Compiler, Runtime, RuntimeConfig};
use crate::server::health::Health;
use crate::source::watch;
use crate::telemetry::Metrics;

/// What `wasmop run` was told, checked.
pub struct Config {
    /// How to reach the API server.
    pub kube: kube::Config,
    /// The `--guest` files.
    pub guests: Vec<GuestSpec>,
    /// The guest list followed, `(namespace, name)`.
    pub list: Option<(String, String)>,
    /// What signatures the list's modules need.
    pub trust: crate::source::signature::Trust,
    /// Where `/metrics` is served (none: off).
    pub metrics: Option<SocketAddr>,
    /// Where `/healthz` and `/readyz` are served (none: off).
    pub probes: Option<SocketAddr>,
    /// Only the holder of the host's own Lease reports ready.
    pub readyz_requires_leader: bool,
    /// The webhooks' settings (none: no webhook is served).
    pub webhooks: Option<crate::webhook::Config>,
    /// Leader election (none: off): its Lease is the host's own, and the
    /// guests' units are named after it.
    pub election: Option<LeaderConfig>,
    /// The namespace of the host's own objects: the guest list's, or the
    /// Leases'.
    pub host_namespace: Option<String>,
    /// Whose identity the guests' requests carry.
    pub guest_identity: GuestIdentity,
    /// Where compiled modules are kept across restarts.
    pub cache_dir: Option<PathBuf>,
    /// Guest calls that may run at once across all guests.
    pub instance_pool: u32,
    /// What one module's compile may use, in its own process.
    pub compile_limits: CompileLimits,
    /// How long SIGTERM waits for running reconciles.
    pub graceful_shutdown_timeout: Duration,
}

/// The running host process.
pub struct App {
    host: Host,
    clients: Clients,
    list: Option<(String, String)>,
    trust: crate::source::signature::Trust,
    elector: Option<Elector>,
    units: Units,
    graceful_shutdown_timeout: Duration,
    /// Tasks that end with the process (the API prober, the memory trimmer).
    background: Vec<tokio::task::JoinHandle<()>>,
}

impl App {
    /// Starts the clients and the elections, the runtime, the endpoints
    /// and the host, and loads the `--guest` files.
    pub async fn start(config: Config) -> anyhow::Result<Self> {
        let mut background = vec![tokio::spawn(crate::memory::trim_periodically())];
        let metrics = Metrics::new();
        let protected = ProtectedObjects::new();
        let api_health = crate::client::ApiHealth::default();
        let (leadership, elector, units) = match &config.election {
            Some(election) => {
                let client =
                    crate::client::for_leader_election(&config.kube, &metrics, &api_health)?;
                protected.set(
                    "lease",
                    [ProtectedRef::namespaced(
                        "coordination.k8s.io",
                        "Lease",
                        &election.namespace,
                        &election.lease_name,
                    )],
                );
                let (leadership, elector) =
                    crate::leader::start(client.clone(), election.clone(), metrics.clone());
                let units = Units::start(
                    client,
                    election.clone(),
                    metrics.clone(),
                    leadership.clone(),
                );
                (leadership, Some(elector), units)
            }
            None => {
                let always = Leadership::always();
                (always.clone(), None, Units::unelected(always))
            }
        };
        let clients = Clients::new(config.kube, metrics.clone(), leadership.clone(), api_health)?
            .with_guest_identity(config.guest_identity);
        background.push(clients.health().probe(clients.host()));
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: config.cache_dir,
            instance_pool: config.instance_pool,
            metrics: metrics.clone(),
            // Compiling in a child process leaves Cranelift's code and
            // memory out of the host's, and bounds what one module's
            // compile may use.
            compiler: match std::env::current_exe() {
                Ok(exe) => Compiler::Worker {
                    exe,
                    limits: config.compile_limits,
                },
                Err(e) => {
                    tracing::warn!(
                        "compiling guests in this process: cannot find its executable: {e}"
                    );
                    Compiler::InProcess
                }
            },
        })?;
        let health = Health::new();
        if let Some(addr) = config.metrics {
            let mut registry = metrics.registry();
            registry.register_collector(Box::new(health.gauges()));
            let bound =
                crate::server::serve(addr, crate::server::metrics::router(registry)).await?;
            tracing::info!(%bound, "serving metrics on /metrics");
        }
        if let Some(addr) = config.probes {
            let probes = crate::server::probes::Probes {
                health: health.clone(),
                leadership: leadership.clone(),
                requires_leader: config.readyz_requires_leader,
                runtime: runtime.clone(),
            };
            let bound = crate::server::serve(addr, crate::server::probes::router(probes)).await?;
            tracing::info!(%bound, "serving probes on /healthz and /readyz");
        }
        let mut host = Host::new(clients.clone(), runtime, protected, health)
            .with_host_namespace(config.host_namespace)
            .with_units(units.clone());
        if let Some((ns, name)) = &config.list {
            host = host.with_list(ns, name);
            host = host.with_board(crate::rollout::Board::new(
                clients.host(),
                ns,
                name,
                leadership.clone(),
            ));
        }
        if let Some(webhooks) = config.webhooks {
            let (webhooks, listening) = crate::webhook::Webhooks::start(
                webhooks,
                clients.host(),
                leadership.clone(),
                metrics.clone(),
                host.protected().clone(),
            )
            .await?;
            crate::server::webhooks::spawn(listening, webhooks.clone());
            host = host.with_webhooks(webhooks);
        }
        for spec in config.guests {
            let name = spec.name.clone();
            anyhow::Context::with_context(host.upsert(spec).await, || {
                format!("loading guest {name:?}")
            })?;
        }
        tracing::info!(
            pid = std::process::id(),
            leader_elect = elector.is_some(),
            "wasmop host running"
        );
        Ok(Self {
            host,
            clients,
            list: config.list,
            trust: config.trust,
            elector,
            units,
            graceful_shutdown_timeout: config.graceful_shutdown_timeout,
            background,
        })
    }

    /// Follows the guest list, if there is one, until SIGTERM or Ctrl-C;
    /// then no new reconcile starts, the running ones finish (within the
    /// graceful shutdown timeout), and the Leases go, so the other replicas
    /// take the work at once.
    pub async fn run(mut self) {
        let shutdown = shutdown_signal();
        match &self.list {
            Some((ns, name)) => {
                tracing::info!(list = %format!("{ns}/{name}"), "following the guest list");
                tokio::select! {
                    () = watch::follow(self.clients.host(), &mut self.host, ns, name, self.trust.clone()) => {}
                    () = shutdown => {}
                }
            }
            None => shutdown.await,
        }
        let timeout = self.graceful_shutdown_timeout;
        let deadline = Instant::now() + timeout;
        self.host.shutdown(timeout).await;
        let left = || {
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_secs(1))
        };
        self.units.release(left()).await;
        if let Some(elector) = self.elector {
            elector.release(left()).await;
        }
        for task in self.background {
            task.abort();
        }
        tracing::info!("wasmop host stopped");
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
    tracing::info!("shutdown requested");
}
