//! What puts a parent in its guest's queue: one trigger per file, each a
//! stream in the shape of kube-runtime's `trigger_owners` and `owns`.
//!
//! - `parents.rs`: the parents' own changes (the watch that fills the
//!   parents' store); a change of the spec is a user's and runs at once, a
//!   parent seen for the first time or the host's own write is background
//!   work.
//! - `children.rs`: a change of a child queues its controller owner.
//! - `related.rs`: a change of a related object queues the parents that
//!   point at it, and one a Metacontroller customize hook selected the
//!   parents whose hooks selected it.
//! - `requeue.rs`: every parent on a resync, a swap, a won election or the
//!   API server's return; a parent a rollout moves, at once.
//!
//! Each counts what it queues in the work-queue metrics and hands it to the
//! pacer, which admits background work behind users' changes.

mod children;
mod parents;
mod related;
mod requeue;

use std::sync::Arc;
use std::time::Duration;

use kube::core::ApiResource;
use kube::runtime::reflector;

pub(super) use children::children;
pub(super) use parents::parents;
pub(super) use related::{customized, related};
pub(super) use requeue::{at_once, every_parent};

use super::compact::Compact;
use super::context::queue_key;
use super::pacer::Pacer;
pub(super) use super::watched::Watched;
use crate::telemetry::QueueTracker;

/// Where a trigger puts a parent: the parents it may name, the queue's
/// metrics and the pacer.
#[derive(Clone)]
pub(super) struct Queueing {
    pub(super) queue: Arc<QueueTracker>,
    pub(super) pacer: Arc<Pacer>,
    /// The primary kind.
    pub(super) primary: ApiResource,
    /// The parents' store.
    pub(super) parents: reflector::Store<Compact>,
}

impl Queueing {
    /// Counts the parent `namespace/name` as added to the queue.
    fn added(&self, namespace: Option<&str>, name: &str) {
        self.queue.add(queue_key(namespace, name), Duration::ZERO);
    }
}
