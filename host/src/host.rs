//! The set of running guests and what happens when it changes.
//!
//! [`Host`] is the one place that starts, swaps and stops guests, whether
//! they come from `--guest` files or from the guest list ConfigMap. Loading a
//! module version (compile, link, describe, and discovery when it needs new
//! watches) happens before the running version is touched, so a bad update
//! leaves the old one serving. Each guest remembers where it came from, so
//! following the guest list never stops a guest given on the command line.

use std::collections::HashMap;

use wasmop_contract::Reason;

use crate::client::Clients;
use crate::controller::{
    ControllerSettings, Environment, GuestSlot, Metrics, RunningController, discovery,
};
use crate::health::Health;
use crate::protected::ProtectedObjects;
use crate::runtime::{CacheOutcome, Guest, Limits, ModuleBytes, Runtime};
use crate::telemetry::metrics::SwapLabels;
use crate::webhook::{Served, Webhooks};

/// Why a guest could not be (re)loaded. The running version, if any, keeps
/// serving.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Compile, link or describe failed.
    #[error(transparent)]
    Load(#[from] crate::runtime::Error),
    /// The kinds it declares cannot be served.
    #[error(transparent)]
    Discovery(#[from] discovery::Error),
    /// Another guest already manages the same primary kind.
    #[error("primary kind {kind} is already managed by guest {other:?}")]
    KindTaken {
        /// The kind.
        kind: String,
        /// The guest managing it.
        other: String,
    },
    /// The name belongs to a guest from another source.
    #[error("guest {name:?} is already given by {other}; this one is ignored")]
    NameTaken {
        /// The guest.
        name: String,
        /// Where the running one comes from.
        other: Origin,
    },
    /// A client for the guest could not be built.
    #[error("cannot build a client for the guest: {0}")]
    Client(#[source] kube::Error),
    /// The blocking load task failed.
    #[error("load task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl Error {
    /// The Event reason for this failure.
    pub fn reason(&self) -> Reason {
        use crate::runtime::Error as Runtime;
        match self {
            Self::Load(Runtime::Compile(_) | Runtime::WrongWorld(_)) => Reason::InvalidModule,
            Self::Load(Runtime::Describe(_)) => Reason::DescribeFailed,
            Self::Load(Runtime::InvalidSettings(_)) => Reason::InvalidSettings,
            Self::Load(Runtime::InvalidDescription(_)) => Reason::InvalidDescription,
            Self::Load(_) | Self::Join(_) | Self::Client(_) | Self::NameTaken { .. } => {
                Reason::GuestLoadFailed
            }
            Self::Discovery(
                discovery::Error::NotServed { .. } | discovery::Error::NotACustomResource { .. },
            ) => Reason::KindsNotServed,
            Self::Discovery(_) => Reason::KindsNotServed,
            Self::KindTaken { .. } => Reason::KindTaken,
        }
    }
}

/// Where a guest comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `wasmop run --guest name=path`.
    Flag,
    /// The guest list ConfigMap.
    List,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Flag => "--guest",
            Self::List => "the guest list",
        })
    }
}

/// One guest as the host should run it.
#[derive(Clone, Debug)]
pub struct GuestSpec {
    /// Unique guest name (label value, field manager suffix).
    pub name: String,
    /// The component bytes, hashed.
    pub module: ModuleBytes,
    /// Sandbox limits.
    pub limits: Limits,
    /// Controller settings.
    pub controller: ControllerSettings,
    /// The guest's own settings (the entry's `settings`) as JSON text.
    pub settings: Option<String>,
    /// Where it comes from.
    pub origin: Origin,
}

/// What [`Host::upsert`] did.
#[derive(Debug)]
pub enum Change {
    /// A new guest started.
    Started(CacheOutcome),
    /// The module version was swapped in place; every parent is queued again.
    Swapped(CacheOutcome),
    /// The guest's kinds or namespaces changed: its controller restarted.
    Restarted(CacheOutcome),
    /// Same module and settings as running: nothing to do.
    Unchanged,
}

struct Running {
    slot: GuestSlot,
    /// The primary kind's resource, for the webhooks.
    primary: kube::core::ApiResource,
    controller: RunningController,
    limits: Limits,
    controller_settings: ControllerSettings,
    origin: Origin,
}

/// The running guests of this process.
pub struct Host {
    clients: Clients,
    runtime: Runtime,
    protected: ProtectedObjects,
    health: Health,
    guests: HashMap<String, Running>,
    webhooks: Option<Webhooks>,
}

impl Host {
    /// A host with no guests yet.
    pub fn new(
        clients: Clients,
        runtime: Runtime,
        protected: ProtectedObjects,
        health: Health,
    ) -> Self {
        Self {
            clients,
            runtime,
            protected,
            health,
            guests: HashMap::new(),
            webhooks: None,
        }
    }

    /// Serves the guests' admission and conversion through `webhooks`.
    #[must_use]
    pub fn with_webhooks(mut self, webhooks: Webhooks) -> Self {
        self.webhooks = Some(webhooks);
        self
    }

    /// Tells the webhooks what `name` now serves, or says why a guest's
    /// exports go unserved.
    fn publish(&self, name: &str) {
        let Some(running) = self.guests.get(name) else {
            return;
        };
        let current = running.slot.current();
        match &self.webhooks {
            Some(webhooks) => webhooks.set(
                name,
                Served {
                    slot: running.slot.clone(),
                    primary: running.primary.clone(),
                    namespaces: running.controller_settings.namespaces.clone(),
                    failure_policy: running.controller_settings.admission_failure_policy,
                    permits: std::sync::Arc::new(tokio::sync::Semaphore::new(usize::from(
                        running.controller_settings.concurrency.max(1),
                    ))),
                },
            ),
            None if current.admits() || current.converts() => tracing::info!(
                guest = %name,
                admits = current.admits(),
                converts = current.converts(),
                "the guest's module has webhook exports, which are not served without --webhook-host"
            ),
            None => {}
        }
    }

    /// What the probes report.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The API clients.
    pub fn clients(&self) -> &Clients {
        &self.clients
    }

    /// The wasm runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The host's own objects, which no guest may write.
    pub fn protected(&self) -> &ProtectedObjects {
        &self.protected
    }

    /// Names of the running guests, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<_> = self.guests.keys().cloned().collect();
        names.sort();
        names
    }

    /// Names of the running guests that came from `origin`, sorted.
    pub fn names_from(&self, origin: Origin) -> Vec<String> {
        let mut names: Vec<_> = self
            .guests
            .iter()
            .filter(|(_, r)| r.origin == origin)
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        names
    }

    /// The module version a guest runs, if it runs.
    pub fn current(&self, name: &str) -> Option<Guest> {
        self.guests.get(name).map(|r| r.slot.current())
    }

    /// A guest's reconcile counters.
    pub fn metrics(&self, name: &str) -> Option<std::sync::Arc<Metrics>> {
        self.guests
            .get(name)
            .map(|r| r.controller.metrics().clone())
    }

    /// Whether running `spec` would change nothing.
    pub fn is_current(&self, spec: &GuestSpec) -> bool {
        self.guests.get(&spec.name).is_some_and(|running| {
            let current = running.slot.current();
            current.digest() == spec.module.digest()
                && current.settings() == spec.settings.as_deref()
                && running.limits == spec.limits
                && running.controller_settings == spec.controller
                && running.origin == spec.origin
        })
    }

    /// Starts `spec`, or swaps it in if a guest of that name runs. Every
    /// change and failure is counted (`wasmop_guest_swaps_total`) and
    /// reaches the health state.
    pub async fn upsert(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        let name = spec.name.clone();
        let old = self.current(&name).map(|g| g.digest().to_owned());
        let result = self.upsert_inner(spec).await;
        let metrics = self.runtime.metrics();
        let swap = |result: &'static str| SwapLabels {
            guest: name.clone(),
            result,
        };
        match &result {
            Ok(Change::Unchanged) => {}
            Ok(change) => {
                if let Some(guest) = self.current(&name) {
                    metrics.set_version(&name, old.as_deref(), guest.digest());
                }
                if matches!(change, Change::Swapped(_) | Change::Restarted(_)) {
                    metrics.guest_swaps.get_or_create(&swap("success")).inc();
                }
                self.health.loaded(&name);
            }
            Err(e) => {
                if old.is_some() {
                    metrics
                        .guest_swaps
                        .get_or_create(&swap(e.reason().as_str()))
                        .inc();
                }
                self.health.failed(&name, e.to_string());
            }
        }
        result
    }

    async fn upsert_inner(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        if let Some(running) = self.guests.get(&spec.name)
            && running.origin != spec.origin
        {
            return Err(Error::NameTaken {
                name: spec.name,
                other: running.origin,
            });
        }
        if self.is_current(&spec) {
            return Ok(Change::Unchanged);
        }
        let runtime = self.runtime.clone();
        let (name, module, limits, settings) = (
            spec.name.clone(),
            spec.module.clone(),
            spec.limits.clone(),
            spec.settings.clone(),
        );
        let (guest, outcome) =
            tokio::task::spawn_blocking(move || runtime.load(&name, &module, limits, settings))
                .await??;
        let primary = &guest.description().primary;
        if let Some((other, _)) = self.guests.iter().find(|(n, r)| {
            **n != spec.name
                && r.slot
                    .current()
                    .description()
                    .primary
                    .same_resource(primary)
        }) {
            return Err(Error::KindTaken {
                kind: primary.to_string(),
                other: other.clone(),
            });
        }
        if let Some(running) = self.guests.get_mut(&spec.name)
            && running.slot.current().description() == guest.description()
            && running.controller_settings == spec.controller
        {
            // Same kinds, same settings: the watches stay, only the module
            // changes (the kinds were resolved when the watches started).
            let old = running.slot.swap(guest);
            running.limits = spec.limits;
            running.controller.requeue_all();
            let name = spec.name.clone();
            self.publish(&name);
            tracing::info!(guest = %spec.name, from = %short(old.digest()), to = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), "swapped guest module");
            self.evict_unused();
            return Ok(Change::Swapped(outcome));
        }
        // New kinds to watch: resolved before anything stops, so that a kind
        // discovery refuses leaves the running version as it is.
        let client = self.clients.for_guest(&spec.name).map_err(Error::Client)?;
        let kinds = discovery::resolve(&client, guest.description()).await?;
        // The kinds or namespaces changed: only this guest's watches restart,
        // gracefully (running reconciles finish on the old version).
        let restarted = match self.guests.remove(&spec.name) {
            Some(running) => {
                drop(running.controller.stop());
                true
            }
            None => false,
        };
        let slot = GuestSlot::new(guest);
        let primary = kinds.primary.resource.clone();
        let controller = RunningController::start(
            Environment {
                client,
                protected: self.protected.clone(),
                leadership: self.clients.leadership().clone(),
                api_health: self.clients.health().clone(),
                telemetry: self.runtime.metrics().clone(),
            },
            slot.clone(),
            kinds,
            &spec.controller,
        );
        self.health.running(&spec.name, controller.synced());
        self.guests.insert(
            spec.name.clone(),
            Running {
                slot,
                primary,
                controller,
                limits: spec.limits,
                controller_settings: spec.controller,
                origin: spec.origin,
            },
        );
        self.evict_unused();
        self.publish(&spec.name);
        if restarted {
            tracing::info!(guest = %spec.name, to = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), watches_restarted = true, "swapped guest module");
            Ok(Change::Restarted(outcome))
        } else {
            tracing::info!(guest = %spec.name, digest = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), "started guest");
            Ok(Change::Started(outcome))
        }
    }

    /// Stops a guest's controller; its children stay as they are.
    pub fn remove(&mut self, name: &str) -> bool {
        self.health.removed(name);
        if let Some(webhooks) = &self.webhooks {
            webhooks.remove(name);
        }
        match self.guests.remove(name) {
            Some(running) => {
                let old = running.slot.current().digest().to_owned();
                drop(running.controller.stop());
                self.runtime.metrics().forget_guest(name);
                self.runtime.metrics().guest_info.remove(
                    &crate::telemetry::metrics::GuestInfoLabels {
                        guest: name.to_owned(),
                        sha256: old,
                    },
                );
                tracing::info!(guest = %name, "stopped guest; its objects are left untouched");
                self.evict_unused();
                true
            }
            None => false,
        }
    }

    /// Stops every guest gracefully: no new reconciles start and the ones
    /// running finish, for at most `timeout`. Children stay as they are.
    pub async fn shutdown(&mut self, timeout: std::time::Duration) {
        let tasks: Vec<_> = self
            .guests
            .drain()
            .flat_map(|(_, running)| running.controller.stop())
            .collect();
        let all = futures::future::join_all(tasks);
        if tokio::time::timeout(timeout, all).await.is_err() {
            tracing::warn!(
                ?timeout,
                "reconciles still running at the end of the graceful shutdown"
            );
        }
    }

    /// Drops compiled versions no guest runs from the in-memory cache (the
    /// disk cache keeps them).
    fn evict_unused(&self) {
        let in_use: Vec<String> = self
            .guests
            .values()
            .map(|r| r.slot.current().digest().to_owned())
            .collect();
        let dropped = self
            .runtime
            .cache()
            .retain(|digest| in_use.iter().any(|d| d == digest));
        if dropped > 0 {
            tracing::debug!(dropped, "dropped compiled module versions no guest runs");
        }
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

fn micros(outcome: &CacheOutcome) -> u64 {
    u64::try_from(outcome.elapsed.as_micros()).unwrap_or(u64::MAX)
}
