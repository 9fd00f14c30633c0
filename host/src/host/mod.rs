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

use std::collections::HashMap;

use wasmop_contract::Reason;

use crate::client::Clients;
use crate::controller::{Environment, GuestSlot, Metrics, RunningController, UnitEnv, discovery};
use crate::leader::units::Units;
use crate::model::Description;
use crate::protected::ProtectedObjects;
use crate::rollout::{
    Board, Candidate, Mode, Parts, Phase, Record, Resume, Rollout, RolloutSettings, Tracker,
};
use crate::runtime::{CacheOutcome, Guest, Limits, ModuleBytes, Runtime};
use crate::server::health::Health;
use crate::settings::ControllerSettings;
use crate::telemetry::metrics::{GuestLabels, SwapLabels};
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
    Discovery(Box<discovery::Error>),
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
    /// A candidate of a rollout reconciles another primary kind, or
    /// declares another finalizer, than the stable version.
    #[error(
        "the candidate {what} ({candidate}) differs from the running version's ({stable}): that change needs rollout strategy Immediate"
    )]
    RolloutKindsChanged {
        /// What differs.
        what: &'static str,
        /// The running version's.
        stable: String,
        /// The candidate's.
        candidate: String,
    },
    /// A progressive rollout of a module listed where the stable version
    /// came from: a restarted host could not fetch the stable one again.
    #[error(
        "the new module is listed at the stable version's own source ({location}): a rollout needs the stable module to stay where it is, so that a restarted host or a standby can load it again; list the new module under another ConfigMap name or key, file, URL or tag, or use rollout strategy Immediate"
    )]
    StableNotPinned {
        /// The source both are listed at.
        location: String,
    },
    /// The guest converts a kind whose CRD converts with a webhook, and
    /// this host serves no webhooks.
    #[error(
        "guest {guest:?} converts {kind}, whose CustomResourceDefinition names a conversion webhook, and this host serves no webhooks: pass --webhook-host <the address the API server reaches this host at> (127.0.0.1 and --webhook-bind-address 127.0.0.1:0 against a local control plane)"
    )]
    WebhookNeeded {
        /// The guest.
        guest: String,
        /// Its primary kind.
        kind: String,
    },
    /// Another list's guest claims the primary kind where this one would
    /// watch, or the claim could not be read or written.
    #[error(transparent)]
    Claim(#[from] crate::claims::Error),
    /// The stable version of a rollout to resume cannot be fetched again.
    #[error(
        "the rollout's stable module sha256 {digest} cannot be fetched again ({why}): the guest starts once it can, or once its entry's rollout strategy is Immediate"
    )]
    StableUnavailable {
        /// The stable module's digest.
        digest: String,
        /// Why it cannot be fetched.
        why: String,
    },
}

impl From<discovery::Error> for Error {
    fn from(e: discovery::Error) -> Self {
        Self::Discovery(Box::new(e))
    }
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
            Self::Load(_)
            | Self::Join(_)
            | Self::Client(_)
            | Self::NameTaken { .. }
            | Self::WebhookNeeded { .. } => Reason::GuestLoadFailed,
            Self::Discovery(_) => Reason::KindsNotServed,
            Self::KindTaken { .. } | Self::Claim(crate::claims::Error::Taken { .. }) => {
                Reason::KindTaken
            }
            Self::Claim(
                crate::claims::Error::Api { .. } | crate::claims::Error::Contended { .. },
            ) => Reason::GuestLoadFailed,
            Self::RolloutKindsChanged { .. } => Reason::RolloutKindsChanged,
            Self::StableUnavailable { .. } | Self::StableNotPinned { .. } => {
                Reason::RolloutStableUnavailable
            }
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
    /// How a new module version rolls out.
    pub rollout: RolloutSettings,
    /// Where the module can be fetched again (a guest list `module` value,
    /// an OCI tag pinned to its digest), recorded while it is the stable
    /// version of a rollout.
    pub source: Option<serde_json::Value>,
    /// Where an earlier host left this guest's rollout, if it did.
    pub resume: Option<ResumeSpec>,
}

/// A rollout to resume: the record, and the stable version's module when
/// it is not the entry's.
#[derive(Clone, Debug)]
pub struct ResumeSpec {
    /// The record in the status ConfigMap.
    pub record: Record,
    /// The stable module, fetched from the record's `stableSource`: `Ok`
    /// when it was, `Err` with why not; `None` when the entry's module is
    /// the stable one.
    pub stable: Option<Result<ModuleBytes, String>>,
}

impl GuestSpec {
    /// A guest with today's defaults for everything but its module.
    pub fn new(name: &str, module: ModuleBytes, origin: Origin) -> Self {
        Self {
            name: name.to_owned(),
            module,
            limits: Limits::default(),
            controller: ControllerSettings::default(),
            settings: None,
            origin,
            rollout: RolloutSettings::default(),
            source: None,
            resume: None,
        }
    }
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
    /// A candidate version started rolling out beside the running one.
    RolloutStarted(CacheOutcome),
    /// The entry names the stable version again: the candidate is gone.
    RolloutCancelled,
    /// A rollout an earlier host left was resumed.
    Resumed(CacheOutcome),
    /// Same module and settings as running: nothing to do.
    Unchanged,
}

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
                && running.slot.candidate().is_none()
                && !running.rollout.has_aborted()
        })
    }

    /// Starts `spec`, or swaps it in if a guest of that name runs. Every
    /// change and failure is counted (`wasmop_guest_swaps_total`) and
    /// reaches the health state.
    pub async fn upsert(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        let name = spec.name.clone();
        let old = self.current(&name).map(|g| g.digest().to_owned());
        let result = self.upsert_inner(spec).await;
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

    /// The entry names the candidate, with other limits or controller
    /// settings: the candidate is loaded again under the new limits (the
    /// stable version keeps its own until the rollout ends), and new
    /// controller settings restart the watches.
    async fn update_candidate(
        &mut self,
        spec: GuestSpec,
        candidate: &Guest,
    ) -> Result<Change, Error> {
        if candidate.limits() != &spec.limits {
            let (guest, _) = self.load(&spec, &spec.module).await?;
            let running = self.guests.get(&spec.name).expect("a running guest");
            running.rollout.reload_candidate(guest);
        }
        let running = self.guests.get(&spec.name).expect("a running guest");
        if running.controller_settings == spec.controller {
            return Ok(Change::Unchanged);
        }
        let client = self
            .clients
            .for_guest(&spec.name, spec.controller.api_budget)
            .map_err(Error::Client)?;
        let kinds = discovery::resolve(&client, &running.watched).await?;
        let env = self.environment(client, &spec.name, &spec.controller)?;
        let running = self.guests.get_mut(&spec.name).expect("a running guest");
        let controller =
            RunningController::start(env, running.slot.clone(), kinds, &spec.controller);
        let old = std::mem::replace(&mut running.controller, controller);
        drop(old.stop());
        let before = running.controller_settings.shards;
        let shards = spec.controller.shards;
        running.controller_settings = spec.controller;
        running.rollout.set_parents(running.controller.parents());
        self.health.running(&spec.name, running.controller.synced());
        self.follow_shards(&spec.name, before, shards);
        tracing::info!(guest = %spec.name, "controller settings changed during a rollout: the watches restarted");
        Ok(Change::Unchanged)
    }

    /// Loads `spec`'s module on a blocking thread.
    async fn load(
        &self,
        spec: &GuestSpec,
        module: &ModuleBytes,
    ) -> Result<(Guest, CacheOutcome), Error> {
        let runtime = self.runtime.clone();
        let (name, module, limits, settings) = (
            spec.name.clone(),
            module.clone(),
            spec.limits.clone(),
            spec.settings.clone(),
        );
        Ok(
            tokio::task::spawn_blocking(move || runtime.load(&name, &module, limits, settings))
                .await??,
        )
    }

    /// Refuses `guest`'s primary kind when another guest manages it.
    fn check_kind_free(&self, name: &str, guest: &Guest) -> Result<(), Error> {
        let primary = &guest.description().primary;
        if let Some((other, _)) = self.guests.iter().find(|(n, r)| {
            **n != name
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
        Ok(())
    }

    /// Refuses a guest whose primary kind another list's guest claims
    /// where it would watch; records the claim of a listed guest.
    async fn claim_kind(
        &self,
        spec: &GuestSpec,
        kinds: &crate::controller::ResolvedKinds,
    ) -> Result<(), Error> {
        let primary = &kinds.primary;
        let Some(crd) = crd_of(&primary.resource) else {
            return Ok(());
        };
        let everywhere: [String; 0] = [];
        let claim = crate::claims::Claim {
            crd,
            namespaces: if primary.namespaced {
                &spec.controller.namespaces
            } else {
                &everywhere
            },
            holder: self
                .list
                .as_ref()
                .filter(|_| spec.origin == Origin::List)
                .map(|list| format!("{list}/{}", spec.name)),
        };
        // The claim is the same whichever replica of this list writes it,
        // so standbys write it too (through the unfenced client).
        Ok(crate::claims::claim(&self.clients.unfenced_host(), &claim).await?)
    }

    /// Refuses a guest whose conversion the API server would call at a
    /// webhook nobody serves.
    fn check_webhooks(
        &self,
        name: &str,
        guest: &Guest,
        kinds: &crate::controller::ResolvedKinds,
    ) -> Result<(), Error> {
        if self.webhooks.is_none() && guest.converts() && kinds.converted_by_webhook {
            return Err(Error::WebhookNeeded {
                guest: name.to_owned(),
                kind: kinds.primary.kind.to_string(),
            });
        }
        Ok(())
    }

    /// The environment a guest's controller runs in: its units of work
    /// (one per shard) registered for the balance.
    fn environment(
        &self,
        client: kube::Client,
        guest: &str,
        settings: &ControllerSettings,
    ) -> Result<Environment, Error> {
        let budget = crate::client::Budget::new(settings.api_budget);
        let units = crate::controller::shards::Shard::all(settings.shards)
            .into_iter()
            .map(|shard| {
                let held = self.units.hold(guest, shard.map(|s| s.index));
                Ok(UnitEnv {
                    client: self
                        .clients
                        .for_guest_unit(guest, &budget, &held.leadership)?,
                    labeller: shard
                        .map(|_| {
                            self.clients.for_guest_doing(
                                guest,
                                &budget,
                                &held.leadership,
                                Some(crate::controller::shards::LABELLER),
                            )
                        })
                        .transpose()?,
                    leadership: held.leadership.clone(),
                    held: std::sync::Arc::new(held),
                })
            })
            .collect::<kube::Result<Vec<_>>>()
            .map_err(Error::Client)?;
        Ok(Environment {
            units,
            client,
            protected: self.protected.clone(),
            leadership: self.clients.leadership().clone(),
            api_health: self.clients.health().clone(),
            telemetry: self.runtime.metrics().clone(),
            host_namespace: self.host_namespace.clone(),
        })
    }

    /// Moves `name`'s rollout to the unit of shard 0 of `shards` shards
    /// when its shards changed from `before` (the unit's Lease is another).
    fn follow_shards(&mut self, name: &str, before: u16, shards: u16) {
        if (before > 1) == (shards > 1) {
            return;
        }
        let unit = self.units.hold(name, (shards > 1).then_some(0));
        if let Some(running) = self.guests.get(name) {
            running
                .rollout
                .set_unit(unit.leadership.clone(), Some(unit));
        }
    }

    /// What a guest's rollout needs from the host.
    fn rollout_parts(&self, name: &str, slot: &GuestSlot, origin: Origin, shards: u16) -> Parts {
        let webhooks = self.webhooks.clone();
        // Driven where the guest is reconciled: by the holder of its unit
        // (of shard 0 for a guest with several).
        let unit = self.units.hold(name, (shards > 1).then_some(0));
        let board = self.board.clone().filter(|_| origin == Origin::List);
        if let Some(board) = &board {
            board.lead(name, unit.leadership.clone());
        }
        Parts {
            leadership: unit.leadership.clone(),
            unit: Some(unit),
            guest: name.to_owned(),
            slot: slot.clone(),
            // Guests given with --guest are not the list's.
            board,
            telemetry: self.runtime.metrics().clone(),
            on_promote: Box::new(move || {
                if let Some(webhooks) = &webhooks {
                    webhooks.changed();
                }
            }),
        }
    }

    /// Starts a guest that does not run yet: its module, or, when an
    /// earlier host left a rollout whose stable version is not the entry's
    /// module (and the entry rolls out progressively), that stable version
    /// with the entry's module as its candidate: resumed where the record
    /// says, kept rolled back if it was, or as a new rollout if the entry
    /// changed meanwhile.
    async fn start(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        let resume = spec.resume.clone();
        let mut stable_module = None;
        let mut stable_settings = spec.settings.clone();
        let mut candidate_mode = None;
        let mut propose_after = false;
        if let Some(ResumeSpec {
            record,
            stable: Some(stable),
        }) = &resume
            && spec.rollout.is_progressive()
            && !is_version(record, &spec)
        {
            stable_module = Some(stable.clone().map_err(|why| Error::StableUnavailable {
                digest: record.stable.clone(),
                why,
            })?);
            if record.candidate.is_some() {
                stable_settings = record.stable_settings.clone();
            }
            if record.candidate.as_deref() == Some(spec.module.digest())
                && record.candidate_settings
                    == crate::rollout::record::settings_hash(spec.settings.as_deref())
            {
                candidate_mode = match record.phase {
                    Phase::Progressing => Some(
                        record
                            .cut()
                            .map_or(Mode::Waiting, |cut| Mode::Canary { cut }),
                    ),
                    Phase::Shadowing => Some(Mode::Shadow),
                    // Rolled back: the stable version alone.
                    _ => None,
                };
            } else {
                propose_after = true;
            }
        }
        let (guest, outcome) = self.load(&spec, &spec.module).await?;
        let resuming = candidate_mode.is_some();
        let (stable, candidate) = match &stable_module {
            Some(module) => {
                let stable_spec = GuestSpec {
                    settings: stable_settings,
                    ..spec.clone()
                };
                let (stable, _) = self.load(&stable_spec, module).await?;
                check_same_kind(&stable, &guest)?;
                (stable, candidate_mode.map(|mode| (guest, mode)))
            }
            None => (guest, None),
        };
        self.check_kind_free(&spec.name, &stable)?;
        let watched = match &candidate {
            Some((candidate, _)) => union(stable.description(), candidate.description()),
            None => stable.description().clone(),
        };
        let client = self
            .clients
            .for_guest(&spec.name, spec.controller.api_budget)
            .map_err(Error::Client)?;
        let kinds = discovery::resolve(&client, &watched).await?;
        self.check_webhooks(&spec.name, &stable, &kinds)?;
        self.claim_kind(&spec, &kinds).await?;
        let slot = GuestSlot::new(stable);
        // The candidate is in place before the first reconcile.
        if let Some((candidate, mode)) = candidate {
            slot.set_candidate(Some(Candidate {
                guest: candidate,
                mode,
                tracker: std::sync::Arc::new(Tracker::new(spec.rollout.ready_condition.clone())),
            }));
        }
        let primary = kinds.primary.resource.clone();
        let converted_by_webhook = kinds.converted_by_webhook;
        let controller = RunningController::start(
            self.environment(client, &spec.name, &spec.controller)?,
            slot.clone(),
            kinds,
            &spec.controller,
        );
        let stable_source = match &resume {
            Some(ResumeSpec { record, .. }) if stable_module.is_some() => {
                record.stable_source.clone()
            }
            _ => spec.source.clone(),
        };
        let rollout = Rollout::start(
            self.rollout_parts(&spec.name, &slot, spec.origin, spec.controller.shards),
            spec.rollout.clone(),
            stable_source,
            resume.filter(|_| !propose_after).map(|r| Resume {
                record: r.record,
                candidate_source: spec.source.clone(),
            }),
        );
        rollout.set_parents(controller.parents());
        self.health.running(&spec.name, controller.synced());
        self.guests.insert(
            spec.name.clone(),
            Running {
                slot,
                primary,
                controller,
                watched,
                converted_by_webhook,
                limits: spec.limits.clone(),
                controller_settings: spec.controller.clone(),
                origin: spec.origin,
                rollout,
            },
        );
        self.evict_unused();
        self.publish(&spec.name);
        if propose_after {
            tracing::info!(guest = %spec.name, "started the stable version an earlier host left; the entry's module rolls out beside it");
            return self.propose(spec).await;
        }
        if resuming {
            tracing::info!(guest = %spec.name, "resumed the rollout an earlier host left");
            Ok(Change::Resumed(outcome))
        } else {
            tracing::info!(guest = %spec.name, digest = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), "started guest");
            Ok(Change::Started(outcome))
        }
    }

    /// Starts rolling out `spec`'s module beside the running version.
    async fn propose(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        let running = self.guests.get(&spec.name).expect("a running guest");
        if let Some(source) = spec.source.as_ref().filter(|s| {
            Some(*s) == running.rollout.stable_source().as_ref()
                && spec.module.digest() != running.slot.current().digest()
        }) {
            // A restarted host or a standby must fetch the stable version
            // again from where it came from: it must still be there.
            return Err(Error::StableNotPinned {
                location: source.to_string(),
            });
        }
        let (guest, outcome) = self.load(&spec, &spec.module).await?;
        let running = self.guests.get(&spec.name).expect("a running guest");
        check_same_kind(&running.slot.current(), &guest)?;
        let watched = union(&running.watched, guest.description());
        if watched != running.watched {
            // The candidate brings kinds of its own: the watches restart
            // with both versions' kinds, resolved before anything stops.
            let budget = running.controller_settings.api_budget;
            let client = self
                .clients
                .for_guest(&spec.name, budget)
                .map_err(Error::Client)?;
            let kinds = discovery::resolve(&client, &watched).await?;
            let settings = running.controller_settings.clone();
            let env = self.environment(client, &spec.name, &settings)?;
            let running = self.guests.get_mut(&spec.name).expect("a running guest");
            let controller = RunningController::start(
                env,
                running.slot.clone(),
                kinds,
                &running.controller_settings,
            );
            let old = std::mem::replace(&mut running.controller, controller);
            drop(old.stop());
            running.watched = watched;
            running.rollout.set_parents(running.controller.parents());
            self.health.running(&spec.name, running.controller.synced());
        }
        let running = self.guests.get(&spec.name).expect("a running guest");
        running
            .rollout
            .propose(guest, spec.source.clone(), spec.rollout.clone());
        self.evict_unused();
        Ok(Change::RolloutStarted(outcome))
    }

    /// Replaces the stable version at once (today's hot swap).
    async fn replace(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        let (guest, outcome) = self.load(&spec, &spec.module).await?;
        self.check_kind_free(&spec.name, &guest)?;
        if let Some(running) = self.guests.get(&spec.name)
            && self.webhooks.is_none()
            && guest.converts()
            && running.converted_by_webhook
        {
            return Err(Error::WebhookNeeded {
                guest: spec.name.clone(),
                kind: guest.description().primary.to_string(),
            });
        }
        if let Some(running) = self.guests.get_mut(&spec.name)
            && running.watched == *guest.description()
            && running.controller_settings == spec.controller
        {
            // Same kinds, same settings: the watches stay, only the module
            // changes (the kinds were resolved when the watches started).
            let old = running
                .rollout
                .swap_stable(guest, spec.source.clone(), spec.rollout.clone());
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
        let client = self
            .clients
            .for_guest(&spec.name, spec.controller.api_budget)
            .map_err(Error::Client)?;
        let kinds = discovery::resolve(&client, guest.description()).await?;
        self.check_webhooks(&spec.name, &guest, &kinds)?;
        self.claim_kind(&spec, &kinds).await?;
        let old_crd = self.guests.get(&spec.name).map(|r| crd_of(&r.primary));
        // The kinds or namespaces changed: only this guest's watches restart,
        // gracefully (running reconciles finish on the old version).
        let env = self.environment(client, &spec.name, &spec.controller)?;
        let running = self.guests.get_mut(&spec.name).expect("a running guest");
        running
            .rollout
            .swap_stable(guest.clone(), spec.source.clone(), spec.rollout.clone());
        let controller =
            RunningController::start(env, running.slot.clone(), kinds.clone(), &spec.controller);
        let old = std::mem::replace(&mut running.controller, controller);
        drop(old.stop());
        running.primary = kinds.primary.resource.clone();
        if let Some(old) = old_crd.filter(|old| *old != crd_of(&running.primary)) {
            self.release_claim(&spec.name, old);
        }
        let running = self.guests.get_mut(&spec.name).expect("a running guest");
        running.converted_by_webhook = kinds.converted_by_webhook;
        running.watched = guest.description().clone();
        running.limits = spec.limits;
        let before = running.controller_settings.shards;
        let shards = spec.controller.shards;
        running.controller_settings = spec.controller;
        running.rollout.set_parents(running.controller.parents());
        self.health.running(&spec.name, running.controller.synced());
        self.follow_shards(&spec.name, before, shards);
        self.evict_unused();
        self.publish(&spec.name);
        tracing::info!(guest = %spec.name, to = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), watches_restarted = true, "swapped guest module");
        Ok(Change::Restarted(outcome))
    }

    /// Stops a guest's controller; its children stay as they are.
    pub fn remove(&mut self, name: &str) -> bool {
        self.health.removed(name);
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

    /// Releases, in the background, the claim guest `name` of the list had
    /// on `crd` (logged if it fails: the claim then stays, as after a crash).
    fn release_claim(&self, name: &str, crd: Option<String>) {
        let (Some(list), Some(crd)) = (&self.list, crd) else {
            return;
        };
        let holder = format!("{list}/{name}");
        let client = self.clients.unfenced_host();
        tokio::spawn(async move {
            if let Err(e) = crate::claims::release(&client, &crd, &holder).await {
                tracing::warn!(%holder, "could not release the claim: {e}");
            }
        });
    }

    /// Drops compiled versions no guest runs from the in-memory cache (the
    /// disk cache keeps them).
    fn evict_unused(&self) {
        let in_use: Vec<String> = self
            .guests
            .values()
            .flat_map(|r| {
                std::iter::once(r.slot.current().digest().to_owned())
                    .chain(r.slot.candidate().map(|c| c.guest.digest().to_owned()))
            })
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

/// The CRD of a primary kind's resource; none for a built-in kind.
fn crd_of(resource: &kube::core::ApiResource) -> Option<String> {
    (!resource.group.is_empty()).then(|| format!("{}.{}", resource.plural, resource.group))
}

/// Whether the record's stable version is the one `spec` lists: its module
/// and, while a rollout runs or was rolled back, its settings.
fn is_version(record: &Record, spec: &GuestSpec) -> bool {
    record.stable == spec.module.digest()
        && (record.candidate.is_none() || record.stable_settings == spec.settings)
}

/// Refuses a candidate that reconciles another primary kind, or declares
/// another finalizer, than the stable version.
fn check_same_kind(stable: &Guest, candidate: &Guest) -> Result<(), Error> {
    let (s, c) = (stable.description(), candidate.description());
    if !s.primary.same_resource(&c.primary) {
        return Err(Error::RolloutKindsChanged {
            what: "primary kind",
            stable: s.primary.to_string(),
            candidate: c.primary.to_string(),
        });
    }
    for child in &c.children {
        if let Some(same) = s
            .children
            .iter()
            .find(|k| k.kind.same_resource(&child.kind) && k.kind.version != child.kind.version)
        {
            return Err(Error::RolloutKindsChanged {
                what: "version of a child kind",
                stable: same.kind.to_string(),
                candidate: child.kind.to_string(),
            });
        }
    }
    if s.finalizer != c.finalizer {
        let show = |f: &Option<String>| f.clone().unwrap_or_else(|| "none".into());
        return Err(Error::RolloutKindsChanged {
            what: "finalizer",
            stable: show(&s.finalizer),
            candidate: show(&c.finalizer),
        });
    }
    Ok(())
}

/// What the watches of two versions cover: `a`'s kinds and those of `b`'s
/// that `a` lacks.
fn union(a: &Description, b: &Description) -> Description {
    let mut out = a.clone();
    for child in &b.children {
        if !out
            .children
            .iter()
            .any(|c| c.kind.same_resource(&child.kind))
        {
            out.children.push(child.clone());
        }
    }
    for related in &b.related {
        if !out.related.contains(related) {
            out.related.push(related.clone());
        }
    }
    out
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

fn micros(outcome: &CacheOutcome) -> u64 {
    u64::try_from(outcome.elapsed.as_micros()).unwrap_or(u64::MAX)
}
