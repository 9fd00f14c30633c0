//! A guest as the host should run it, where it comes from, and what a
//! change of it did.

use crate::rollout::{Record, RolloutSettings};
use crate::runtime::{CacheOutcome, Limits, ModuleBytes};
use crate::settings::ControllerSettings;

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
