//! The generic controller that drives one guest.
//!
//! watch → queue → reconcile. For every guest the host watches the primary
//! kind and each declared child kind (children selected by the
//! `wasmop.dev/guest` label, indexed by their controller ownerReference's
//! UID in [`index`]) in one scope per namespace and shard ([`scope`]).
//! kube-runtime's controller provides the queue: keys are deduplicated, one
//! key never runs twice at once. What puts a parent in the queue is in
//! [`triggers`]; one reconcile, stage by stage, in [`reconcile`]. The host
//! adds a bound on the reconciles of one guest running at once, across all
//! its scopes; per-key exponential backoff ([`backoff`]); background work
//! held behind users' changes ([`pacer`]); and the checks that a guest's
//! answers make progress ([`progress`]).

pub mod adopt;
pub mod apply;
pub mod backoff;
mod cached;
pub mod compact;
mod context;
mod customized;
pub mod discovery;
mod environment;
pub mod finalizer;
pub mod index;
mod labeller;
mod last_writes;
pub mod pacer;
pub mod progress;
pub mod reconcile;
pub mod related;
mod scope;
mod shadow;
pub mod shards;
pub mod status;
mod triggers;
mod watched;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::runtime::reflector::ObjectRef;

pub use crate::rollout::GuestSlot;
pub use context::Metrics;
pub use discovery::{ResolvedKind, ResolvedKinds};
pub use environment::{Environment, UnitEnv};

use crate::settings::ControllerSettings;
use compact::ParentRef;
use scope::{ParentStore, Scope, Scoped, Signals};

/// A running controller for one guest; dropping it does not stop it, call
/// [`RunningController::stop`].
pub struct RunningController {
    requeue_all: tokio::sync::broadcast::Sender<()>,
    shutdown: tokio::sync::watch::Sender<bool>,
    metrics: Arc<Metrics>,
    synced: Vec<Arc<AtomicBool>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    parents: Arc<Parents>,
}

/// The parents of one guest across its namespace scopes, as the rollout
/// sees them.
pub struct Parents {
    scopes: Vec<(ParentStore, tokio::sync::mpsc::UnboundedSender<ParentRef>)>,
    /// Per scope: whether the parents were listed once.
    listed: Vec<Arc<AtomicBool>>,
    requeue_all: tokio::sync::broadcast::Sender<()>,
    primary: kube::core::ApiResource,
}

impl crate::rollout::ParentSet for Parents {
    fn positions(&self) -> Vec<(String, u64)> {
        self.scopes
            .iter()
            .flat_map(|(store, _)| store.current().state())
            .filter_map(|p| {
                let uid = p.metadata.uid.clone()?;
                let position = crate::rollout::side::position(&uid);
                Some((uid, position))
            })
            .collect()
    }

    fn count(&self) -> usize {
        self.scopes
            .iter()
            .map(|(store, _)| store.current().state().len())
            .sum()
    }

    fn requeue_at_once(&self, range: std::ops::RangeInclusive<u64>) {
        for (store, at_once) in &self.scopes {
            for parent in store.current().state() {
                let Some(uid) = parent.metadata.uid.as_deref() else {
                    continue;
                };
                if range.contains(&crate::rollout::side::position(uid)) {
                    let _ = at_once.send(ObjectRef::from_obj_with(&*parent, self.primary.clone()));
                }
            }
        }
    }

    fn requeue_all(&self) {
        let _ = self.requeue_all.send(());
    }

    fn listed(&self) -> bool {
        self.listed.iter().all(|l| l.load(Ordering::Acquire))
    }
}

impl RunningController {
    /// Starts the watches and the queue for the guest in `slot`.
    pub fn start(
        env: Environment,
        slot: GuestSlot,
        kinds: ResolvedKinds,
        settings: &ControllerSettings,
    ) -> Self {
        let metrics = Arc::new(Metrics::default());
        let scopes: Vec<Option<String>> =
            if settings.namespaces.is_empty() || !kinds.primary.namespaced {
                vec![None]
            } else {
                settings.namespaces.iter().cloned().map(Some).collect()
            };
        // One requeue-all signal, one shutdown signal and one bound on
        // concurrent reconciles reach every namespace scope of the guest.
        let (requeue_all, _) = tokio::sync::broadcast::channel::<()>(16);
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let permits = Arc::new(tokio::sync::Semaphore::new(usize::from(
            settings.concurrency.max(1),
        )));
        let guest = slot.current().name().to_owned();
        let shadows = shadow::Queue::start(
            &guest,
            permits.clone(),
            usize::from(settings.concurrency.max(1)),
        );
        env.telemetry
            .init_controller(&guest)
            .set(i64::from(settings.concurrency.max(1)));
        let queue = env.telemetry.queue(&guest);
        let mut synced = Vec::new();
        let mut tasks = Vec::new();
        let mut parent_scopes = Vec::new();
        let mut listed = Vec::new();
        let shard_scopes = shards::Shard::all(settings.shards);
        if settings.shards > 1 {
            // Kept by whoever holds shard 0.
            let first = shards::Shard {
                index: 0,
                count: settings.shards,
            };
            let leadership = env.for_shard(Some(first)).leadership;
            for namespace in &scopes {
                let labelling = labeller::Labelling {
                    relabeller: env.relabeller(first, &kinds, &guest),
                    namespace: namespace.clone(),
                    left_out: environment::left_out(namespace.as_deref(), &env),
                    leadership: leadership.clone(),
                };
                tasks.push(tokio::spawn(labeller::keep_labelled(
                    labelling,
                    shutdown.subscribe(),
                )));
            }
        }
        let scopes = scopes.into_iter().flat_map(|namespace| {
            shard_scopes
                .iter()
                .map(move |shard| (namespace.clone(), *shard))
        });
        for (namespace, shard) in scopes {
            let flag = Arc::new(AtomicBool::new(false));
            synced.push(flag.clone());
            let parents = ParentStore::new(&kinds.primary.resource);
            let (at_once, at_once_rx) = tokio::sync::mpsc::unbounded_channel();
            parent_scopes.push((parents.clone(), at_once));
            let parents_listed = Arc::new(AtomicBool::new(false));
            listed.push(parents_listed.clone());
            tasks.push(tokio::spawn(scope::run_scope(
                Scope {
                    parents,
                    parents_listed,
                    at_once: at_once_rx,
                    scoped: Scoped {
                        env: env.for_shard(shard),
                        slot: slot.clone(),
                        kinds: kinds.clone(),
                        settings: settings.clone(),
                        namespace,
                        shard,
                        permits: permits.clone(),
                        shadows: shadows.clone(),
                        metrics: metrics.clone(),
                        queue: queue.clone(),
                        synced: flag,
                    },
                },
                Signals {
                    requeue: requeue_all.subscribe(),
                    shutdown: shutdown.subscribe(),
                },
            )));
        }
        let parents = Arc::new(Parents {
            scopes: parent_scopes,
            listed,
            requeue_all: requeue_all.clone(),
            primary: kinds.primary.resource.clone(),
        });
        Self {
            requeue_all,
            shutdown,
            metrics,
            synced,
            tasks,
            parents,
        }
    }

    /// The guest's parents, for its rollout.
    pub fn parents(&self) -> Arc<Parents> {
        self.parents.clone()
    }

    /// One flag per namespace scope: set once its parent and child caches
    /// have their first lists.
    pub fn synced(&self) -> Vec<Arc<AtomicBool>> {
        self.synced.clone()
    }

    /// Queues every parent of this guest again (after a hot swap).
    pub fn requeue_all(&self) {
        let _ = self.requeue_all.send(());
    }

    /// The guest's reconcile counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Stops the watches and the queue gracefully: no new reconciles start,
    /// the ones running finish (on the module version they started with).
    /// Children are left untouched. Await the handles to know when the
    /// running reconciles have finished.
    pub fn stop(self) -> Vec<tokio::task::JoinHandle<()>> {
        let _ = self.shutdown.send(true);
        self.tasks
    }
}
