//! The set of running guests and what happens when it changes.
//!
//! [`Host`] is the one place that starts, swaps and stops guests, whether
//! they come from `--guest` files or from the guest list ConfigMap. Loading a
//! module version (compile, link, describe, and discovery when it needs new
//! watches) happens before the running version is touched, so a bad update
//! leaves the old one serving. Each guest remembers where it came from, so
//! following the guest list never stops a guest given on the command line.
//!
//! A listed guest whose entry has a progressive `rollout` (Shadow, Canary)
//! gets a new module as a candidate beside the running (stable) version
//! instead of a swap ([`crate::rollout`]); the watches then cover both
//! versions' kinds. A host that starts where a rollout was left (the status
//! ConfigMap's record) loads both versions before any reconcile runs.

//!
//! The files: what a guest is ([`spec`]) and why it fails to load
//! ([`error`]); starting it and swapping its version ([`swap`]); a new
//! version as a candidate ([`candidate`]); its kinds among the other
//! guests' and hosts' ([`kinds`]); its units of work ([`units`]); what the
//! webhooks serve of it ([`webhooks`]). This file holds the set and its
//! lifecycle: change, remove, shut down.

mod candidate;
mod error;
mod kinds;
mod spec;
mod swap;
mod units;
mod webhooks;

use std::collections::HashMap;

pub use error::Error;
pub use spec::{Change, GuestSpec, Origin, ResumeSpec};

use crate::client::Clients;
use crate::controller::{GuestSlot, Metrics, RunningController};
use crate::leader::units::Units;
use crate::model::Description;
use crate::protected::ProtectedObjects;
use crate::rollout::{Board, Record, Rollout};
use crate::runtime::{Guest, Limits, Runtime};
use crate::server::health::Health;
use crate::settings::ControllerSettings;
use crate::telemetry::metrics::{GuestLabels, SwapLabels};
use crate::webhook::Webhooks;
use kinds::crd_of;

struct Running {
    slot: GuestSlot,
    /// The primary kind's resource, for the webhooks.
    primary: kube::core::ApiResource,
    controller: RunningController,
    /// What the controller's watches were resolved from (during and after
    /// a rollout, both versions' kinds).
    watched: Description,
    /// Whether the primary kind's CRD converts with a webhook.
    converted_by_webhook: bool,
    limits: Limits,
    controller_settings: ControllerSettings,
    origin: Origin,
    rollout: Rollout,
}

/// The running guests of this process.
pub struct Host {
    clients: Clients,
    runtime: Runtime,
    protected: ProtectedObjects,
    health: Health,
    guests: HashMap<String, Running>,
    webhooks: Option<Webhooks>,
    board: Option<Board>,
    host_namespace: Option<String>,
    /// `<namespace>/<name>` of the guest list, whose guests claim their
    /// kinds (`claims`).
    list: Option<String>,
    /// The units of work of the guests, spread over the replicas.
    units: Units,
    /// The guests whose share of the instance pool holds fewer reconciles
    /// at once than their entry asks: (asked, granted).
    clamped: HashMap<String, (u16, u16)>,
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
            units: Units::unelected(clients.leadership().clone()),
            clients,
            runtime,
            protected,
            health,
            guests: HashMap::new(),
            webhooks: None,
            board: None,
            host_namespace: None,
            list: None,
            clamped: HashMap::new(),
        }
    }

    /// The guests' units of work are spread over the replicas by `units`.
    #[must_use]
    pub fn with_units(mut self, units: Units) -> Self {
        self.units = units;
        self
    }

    /// The guests of the list `<namespace>/<name>` claim their primary
    /// kinds in the cluster (`claims`).
    #[must_use]
    pub fn with_list(mut self, namespace: &str, name: &str) -> Self {
        self.list = Some(format!("{namespace}/{name}"));
        self
    }

    /// The namespace of the host's own objects (the guest list's): no
    /// guest's related objects are read there.
    #[must_use]
    pub fn with_host_namespace(mut self, namespace: Option<String>) -> Self {
        self.host_namespace = namespace.filter(|ns| !ns.is_empty());
        self
    }

    /// Records every listed guest's rollout on `board` (the status
    /// ConfigMap beside the guest list).
    #[must_use]
    pub fn with_board(mut self, board: Board) -> Self {
        self.board = Some(board);
        self
    }

    /// The board rollout records go to, when the host follows a list.
    pub fn board(&self) -> Option<&Board> {
        self.board.as_ref()
    }

    /// Follows the records the leader wrote (on a standby).
    pub fn follow_records(&self, records: &std::collections::BTreeMap<String, Record>) {
        for (name, running) in &self.guests {
            if let Some(record) = records.get(name) {
                running.rollout.follow(record);
            }
        }
    }

    /// A guest's rollout record.
    pub fn record(&self, name: &str) -> Option<Record> {
        self.guests.get(name).map(|r| r.rollout.record())
    }

    /// Serves the guests' admission and conversion through `webhooks`.
    #[must_use]
    pub fn with_webhooks(mut self, webhooks: Webhooks) -> Self {
        self.webhooks = Some(webhooks);
        self
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
                && running.slot.candidate().is_none()
                && !running.rollout.has_aborted()
        })
    }

    /// Starts `spec`, or swaps it in if a guest of that name runs. Every
    /// change and failure is counted (`wasmop_guest_swaps_total`) and
    /// reaches the health state.
    pub async fn upsert(&mut self, mut spec: GuestSpec) -> Result<Change, Error> {
        let name = spec.name.clone();
        let old = self.current(&name).map(|g| g.digest().to_owned());
        // The guest runs with the concurrency its share of the instance
        // pool allows beside the other guests' (said once, when it changes).
        let asked = spec.controller.concurrency;
        self.runtime.shares().ask(&name, asked);
        let result = match self.runtime.shares().grant(&name) {
            Ok(granted) => {
                spec.controller.concurrency = granted;
                let result = self.upsert_inner(spec).await;
                if result.is_ok() {
                    self.note_share(&name, asked, granted);
                }
                result
            }
            Err(full) => Err(Error::PoolFull(full)),
        };
        // `wasmop_guest_info` follows the guest's versions (its rollout
        // shows them).
        let metrics = self.runtime.metrics();
        let swap = |result: &'static str| SwapLabels {
            guest: name.clone(),
            result,
        };
        match &result {
            Ok(Change::Unchanged | Change::RolloutStarted(_) | Change::RolloutCancelled) => {}
            Ok(change) => {
                if matches!(change, Change::Swapped(_) | Change::Restarted(_)) {
                    metrics.guest_swaps.get_or_create(&swap("success")).inc();
                }
                if let Some(current) = self.current(&name) {
                    metrics
                        .guest_deadline
                        .get_or_create(&GuestLabels {
                            guest: name.clone(),
                        })
                        .set(current.limits().timeout.as_secs_f64());
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
        let Some(running) = self.guests.get(&spec.name) else {
            return self.start(spec).await;
        };
        if running.origin != spec.origin {
            return Err(Error::NameTaken {
                name: spec.name,
                other: running.origin,
            });
        }
        let is = |guest: &Guest| {
            guest.digest() == spec.module.digest() && guest.settings() == spec.settings.as_deref()
        };
        if is(&running.slot.current()) {
            // The entry names the stable version (again).
            let cancelled = running.slot.candidate().is_some() || running.rollout.has_aborted();
            if cancelled {
                running
                    .rollout
                    .cancel("the guest list names the stable version again");
            }
            running.rollout.set_settings(spec.rollout.clone());
            if self.is_current(&spec) {
                return Ok(if cancelled {
                    Change::RolloutCancelled
                } else {
                    Change::Unchanged
                });
            }
        } else if let Some(candidate) = running.slot.candidate().filter(|c| is(&c.guest)) {
            running.rollout.set_settings(spec.rollout.clone());
            return self.update_candidate(spec, &candidate.guest).await;
        } else if running
            .rollout
            .aborted(spec.module.digest(), spec.settings.as_deref())
        {
            // Rolled back: not tried again until the entry's module changes.
            return Ok(Change::Unchanged);
        } else if spec.rollout.is_progressive() {
            return self.propose(spec).await;
        }
        self.replace(spec).await
    }

    /// The guests `asks` names, with the concurrency each asks, are about
    /// to be upserted: each one's share of the instance pool is reckoned
    /// with all of them, whichever comes first.
    pub fn expect<'a>(&self, asks: impl IntoIterator<Item = (&'a str, u16)>) {
        for (name, concurrency) in asks {
            self.runtime.shares().ask(name, concurrency);
        }
    }

    /// Guest `name`, expected but never loaded, is expected no more.
    pub fn unexpect(&self, name: &str) {
        if !self.guests.contains_key(name) {
            self.runtime.shares().forget(name);
        }
    }

    /// Records that `name` asked `asked` reconciles at once and got
    /// `granted`, and says so when that changes.
    fn note_share(&mut self, name: &str, asked: u16, granted: u16) {
        let clamp = (granted < asked).then_some((asked, granted));
        if self.clamped.get(name).copied() == clamp {
            return;
        }
        match clamp {
            Some(_) => {
                tracing::warn!(guest = %name, asked, granted, "the guest runs {granted} reconciles at once, not the {asked} its entry asks: its share of the instance pool beside the other guests' holds no more (raise --instance-pool)");
                self.clamped.insert(name.to_owned(), (asked, granted));
            }
            None => {
                self.clamped.remove(name);
            }
        }
    }

    /// When guest `name` runs fewer reconciles at once than its entry asks
    /// (its share of the instance pool holds no more): what it asked and
    /// what it got.
    pub fn clamped(&self, name: &str) -> Option<(u16, u16)> {
        self.clamped.get(name).copied()
    }

    /// Stops a guest's controller; its children stay as they are.
    pub fn remove(&mut self, name: &str) -> bool {
        self.health.removed(name);
        self.runtime.shares().forget(name);
        self.clamped.remove(name);
        if let Some(webhooks) = &self.webhooks {
            webhooks.remove(name);
        }
        match self.guests.remove(name) {
            Some(running) => {
                drop(running.controller.stop());
                if running.origin == Origin::List {
                    self.release_claim(name, crd_of(&running.primary));
                }
                running.rollout.remove();
                self.runtime.metrics().forget_guest(name);
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
}
