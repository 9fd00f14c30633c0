//! What puts a parent in its guest's queue: one trigger per file, each a
//! stream in the shape of kube-runtime's `trigger_owners` and `owns`.
//!
//! - `parents.rs`: the parents' own changes (the watch that fills the
//!   parents' store); a change of the spec is a user's and runs at once, a
//!   parent seen for the first time or the host's own write is background
//!   work.
//! - `children.rs`: a change of a child queues its controller owner.
//! - `related.rs`: a change of a related object queues the parents that
//!   point at it.
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

use kube::Client;
use kube::core::ApiResource;
use kube::runtime::{reflector, watcher};

pub(super) use children::children;
pub(super) use parents::parents;
pub(super) use related::related;
pub(super) use requeue::{at_once, every_parent};

use super::compact::Compact;
use super::pacer::Pacer;
use super::shards::Shard;
use super::{ResolvedKinds, queue_key};
use crate::telemetry::{Metrics as Telemetry, QueueTracker};

/// What a trigger watches: the guest's kinds in one namespace scope.
pub(super) struct Watched<'a> {
    pub(super) client: &'a Client,
    pub(super) kinds: &'a ResolvedKinds,
    /// The scope's namespace (`None`: all).
    pub(super) namespace: Option<&'a str>,
    /// The host's own namespace, when the scope is every namespace: its
    /// parents and children are left out of the watches.
    pub(super) left_out: Option<&'a str>,
    /// The scope's shard: only the parents and children labelled with it
    /// are watched.
    pub(super) shard: Option<Shard>,
}

impl Watched<'_> {
    /// How the scope's parents and children are watched: everywhere in the
    /// scope but the namespace [`Self::left_out`] names (the API server
    /// leaves it out of the list and the watch).
    pub(super) fn config(&self) -> watcher::Config {
        self.config_selecting(None)
    }

    /// [`Self::config`], selecting also by the label selector `labels`.
    pub(super) fn config_selecting(&self, labels: Option<&str>) -> watcher::Config {
        let mut config = match self.left_out {
            Some(ns) => watcher::Config::default().fields(&format!("metadata.namespace!={ns}")),
            None => watcher::Config::default(),
        };
        let selector: Vec<String> = labels
            .map(str::to_owned)
            .into_iter()
            .chain(self.shard.map(|s| s.selector()))
            .collect();
        if !selector.is_empty() {
            config = config.labels(&selector.join(","));
        }
        config
    }
}

/// Where a trigger puts a parent: the parents it may name, the queue's
/// metrics and the pacer.
#[derive(Clone)]
pub(super) struct Queueing {
    pub(super) telemetry: Arc<Telemetry>,
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
        self.queue
            .add(&self.telemetry, queue_key(namespace, name), Duration::ZERO);
    }
}
