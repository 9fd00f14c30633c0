//! What every reconcile of one guest's scope shares: its clients, caches,
//! queue bookkeeping and counters.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector;

use super::apply;
use super::backoff::Backoff;
use super::compact::{Compact, ParentRef};
use super::customized::Customized;
use super::discovery::ResolvedKinds;
use super::index::ChildIndex;
use super::labeller::Relabeller;
use super::last_writes::LastWrites;
use super::pacer::Pacer;
use super::progress::Progress;
use super::related::RelatedIndex;
use super::shadow::Sink;
use super::shards::Shard;
use crate::events::Events;
use crate::leader::Leadership;
use crate::protected::ProtectedObjects;
use crate::rollout::GuestSlot;
use crate::settings::ControllerSettings;
use crate::telemetry::{Metrics as Telemetry, QueueTracker};

/// Counters of one guest's reconciles (read by tests, benches and logs).
#[derive(Debug, Default)]
pub struct Metrics {
    succeeded: AtomicU64,
    failed: AtomicU64,
}

impl Metrics {
    pub(super) fn record_success(&self) {
        self.succeeded.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn record_failure(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Successful reconciles so far.
    pub fn succeeded(&self) -> u64 {
        self.succeeded.load(Ordering::Relaxed)
    }

    /// Failed reconciles so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// Everything a reconcile of one guest needs. Shared by its reconciles.
pub struct Context {
    pub(super) client: Client,
    pub(super) guest_name: String,
    pub(super) field_manager: String,
    pub(super) host_manager: String,
    pub(super) slot: GuestSlot,
    pub(super) kinds: ResolvedKinds,
    pub(super) settings: ControllerSettings,
    pub(super) children: Arc<ChildIndex>,
    pub(super) child_kind_names: Vec<String>,
    pub(super) related: Arc<RelatedIndex>,
    pub(super) related_kind_names: Vec<String>,
    /// What Metacontroller controllers' customize hooks select.
    pub(super) customized: Customized,
    /// The generations Metacontroller parents' orphans were claimed at.
    pub(super) adoption: super::adopt::Adoption,
    /// The namespace this scope watches (`None`: all).
    pub(super) scope: Option<String>,
    /// The shard this scope reconciles (`None`: the guest is not sharded).
    pub(super) shard: Option<Shard>,
    /// For a shard: moves a parent labelled with it but hashed elsewhere.
    pub(super) relabeller: Option<Relabeller>,
    pub(super) events: Arc<Events>,
    pub(super) backoff: Backoff<ParentRef>,
    pub(super) progress: Progress,
    /// The parents as the host's own latest writes left them.
    pub(super) last_writes: Arc<LastWrites>,
    /// The parents' store (the queue hands a reconcile the copy it held
    /// when the key came due).
    pub(super) parents: reflector::Store<Compact>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) permits: Arc<tokio::sync::Semaphore>,
    /// Where a shadow candidate's comparisons go (the guest's shadow
    /// queue, across its scopes).
    pub(super) shadow: Sink,
    pub(super) protected: ProtectedObjects,
    pub(super) leadership: Leadership,
    pub(super) telemetry: Arc<Telemetry>,
    pub(super) queue: Arc<QueueTracker>,
    /// Background work waiting for room in the queue.
    pub(super) pacer: Arc<Pacer>,
}

impl Context {
    pub(super) fn parent_api(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        apply::api_for(&self.client, &self.kinds.primary.resource, namespace)
    }
}

/// The queue key of an object: `namespace/name`.
pub(crate) fn queue_key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}
