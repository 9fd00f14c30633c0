//! The set of running guests and what happens when it changes.
//!
//! [`Host`] is the one place that starts, swaps and stops guests, whether
//! they come from `--guest` files or from the guest list ConfigMap. Loading a
//! module version (compile, link, describe, and discovery when it needs new
//! watches) happens before the running version is touched, so a bad update
//! leaves the old one serving.

use std::collections::HashMap;

use kube::Client;

use crate::controller::{ControllerSettings, GuestSlot, Metrics, RunningController, discovery};
use crate::runtime::{CacheOutcome, Guest, Limits, Runtime};

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
    /// The blocking load task failed.
    #[error("load task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl Error {
    /// The Event reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Load(
                crate::runtime::Error::Compile(_) | crate::runtime::Error::WrongWorld(_),
            ) => "InvalidModule",
            Self::Load(crate::runtime::Error::Describe(_)) => "DescribeFailed",
            Self::Load(_) | Self::Join(_) => "GuestLoadFailed",
            Self::Discovery(_) => "KindsNotServed",
            Self::KindTaken { .. } => "KindTaken",
        }
    }
}

/// One guest as the host should run it.
#[derive(Clone, Debug)]
pub struct GuestSpec {
    /// Unique guest name (label value, field manager suffix).
    pub name: String,
    /// The component bytes.
    pub module: Vec<u8>,
    /// Sandbox limits.
    pub limits: Limits,
    /// Controller settings.
    pub settings: ControllerSettings,
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
    controller: RunningController,
    limits: Limits,
    settings_key: String,
}

/// The running guests of this process.
pub struct Host {
    client: Client,
    runtime: Runtime,
    guests: HashMap<String, Running>,
}

impl Host {
    /// A host with no guests yet.
    pub fn new(client: Client, runtime: Runtime) -> Self {
        Self {
            client,
            runtime,
            guests: HashMap::new(),
        }
    }

    /// The wasm runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Names of the running guests, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<_> = self.guests.keys().cloned().collect();
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

    /// Starts `spec`, or swaps it in if a guest of that name runs.
    pub async fn upsert(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        if let Some(running) = self.guests.get(&spec.name) {
            let current = running.slot.current();
            if current.digest() == crate::runtime::cache::digest(&spec.module)
                && running.limits == spec.limits
                && running.settings_key == settings_key(&spec.settings)
            {
                return Ok(Change::Unchanged);
            }
        }
        let runtime = self.runtime.clone();
        let (name, module, limits) = (spec.name.clone(), spec.module, spec.limits.clone());
        let (guest, outcome) =
            tokio::task::spawn_blocking(move || runtime.load(&name, &module, limits)).await??;
        let primary = guest.description().primary.to_string();
        if let Some((other, _)) = self.guests.iter().find(|(n, r)| {
            **n != spec.name && r.slot.current().description().primary.to_string() == primary
        }) {
            return Err(Error::KindTaken {
                kind: primary,
                other: other.clone(),
            });
        }
        let key = settings_key(&spec.settings);
        if let Some(running) = self.guests.get_mut(&spec.name)
            && running.slot.current().description() == guest.description()
            && running.settings_key == key
        {
            // Same kinds, same settings: the watches stay, only the module
            // changes (the kinds were resolved when the watches started).
            let old = running.slot.swap(guest);
            running.limits = spec.limits;
            running.controller.requeue_all();
            tracing::info!(guest = %spec.name, from = %short(old.digest()), to = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), "swapped guest module");
            return Ok(Change::Swapped(outcome));
        }
        // New kinds to watch: resolved before anything stops, so that a kind
        // discovery refuses leaves the running version as it is.
        let kinds = discovery::resolve(&self.client, guest.description()).await?;
        // The kinds or namespaces changed: only this guest's watches restart,
        // gracefully (running reconciles finish on the old version).
        let restarted = match self.guests.remove(&spec.name) {
            Some(running) => {
                running.controller.stop();
                true
            }
            None => false,
        };
        self.start(
            spec.name.clone(),
            guest,
            kinds,
            spec.limits,
            &spec.settings,
            key,
        );
        if restarted {
            tracing::info!(guest = %spec.name, to = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), watches_restarted = true, "swapped guest module");
            Ok(Change::Restarted(outcome))
        } else {
            tracing::info!(guest = %spec.name, digest = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), "started guest");
            Ok(Change::Started(outcome))
        }
    }

    fn start(
        &mut self,
        name: String,
        guest: Guest,
        kinds: discovery::ResolvedKinds,
        limits: Limits,
        settings: &ControllerSettings,
        settings_key: String,
    ) {
        let slot = GuestSlot::new(guest);
        let controller =
            RunningController::start(self.client.clone(), slot.clone(), kinds, settings);
        self.guests.insert(
            name,
            Running {
                slot,
                controller,
                limits,
                settings_key,
            },
        );
    }

    /// Stops a guest's controller; its children stay as they are.
    pub fn remove(&mut self, name: &str) -> bool {
        match self.guests.remove(name) {
            Some(running) => {
                running.controller.stop();
                tracing::info!(guest = %name, "stopped guest; its objects are left untouched");
                true
            }
            None => false,
        }
    }
}

fn settings_key(s: &ControllerSettings) -> String {
    format!("{}|{:?}|{:?}", s.concurrency, s.resync, s.namespaces)
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

fn micros(outcome: &CacheOutcome) -> u64 {
    u64::try_from(outcome.elapsed.as_micros()).unwrap_or(u64::MAX)
}
