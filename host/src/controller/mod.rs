//! The generic controller that drives one guest.
//!
//! watch → queue → guest call → validate → apply → status. For every guest
//! the host watches the primary kind and each declared child kind (children
//! selected by the `wasmop.dev/guest` label, indexed by their controller
//! ownerReference's UID in [`index`]). kube-runtime's controller provides
//! the queue: keys are deduplicated, one key never runs twice at once. The
//! host adds a bound on the reconciles of one guest running at once, across
//! all its namespace scopes; per-key exponential backoff ([`backoff`]); a
//! predicate that ignores status-only changes of the parent; periodic
//! resync; "reconcile everything" after a hot swap; and the checks that a
//! guest's answers make progress ([`progress`]).

pub mod apply;
pub mod backoff;
mod cached;
pub mod compact;
pub mod discovery;
pub mod finalizer;
pub mod gather;
pub mod index;
pub mod pacer;
pub mod progress;
pub mod reconcile;
pub mod related;
mod shadow;
pub mod shards;
pub mod status;
mod triggers;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

pub use crate::rollout::GuestSlot;
pub use discovery::{ResolvedKind, ResolvedKinds};

use crate::events::Events;
use crate::leader::Leadership;
use crate::protected::ProtectedObjects;
use crate::settings::ControllerSettings;
use crate::telemetry::{Metrics as Telemetry, QueueTracker};
use crate::validate::GUEST_LABEL;
use backoff::Backoff;
use compact::{Compact, ParentRef, parent_ref};
use index::ChildIndex;
use progress::Progress;
use related::RelatedIndex;
use wasmop_contract::names::{field_manager, host_field_manager};

/// How often a controller forgets the backoff and progress records of
/// parents that are gone.
const SWEEP_PERIOD: Duration = Duration::from_secs(60);

/// Counters of one guest's reconciles (read by tests, benches and logs).
#[derive(Debug, Default)]
pub struct Metrics {
    succeeded: AtomicU64,
    failed: AtomicU64,
}

impl Metrics {
    fn record_success(&self) {
        self.succeeded.fetch_add(1, Ordering::Relaxed);
    }

    fn record_failure(&self) {
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
    client: Client,
    guest_name: String,
    field_manager: String,
    host_manager: String,
    slot: GuestSlot,
    kinds: ResolvedKinds,
    settings: ControllerSettings,
    children: Arc<ChildIndex>,
    child_kind_names: Vec<String>,
    related: Arc<RelatedIndex>,
    related_kind_names: Vec<String>,
    /// The namespace this scope watches (`None`: all).
    scope: Option<String>,
    /// The shard this scope reconciles (`None`: the guest is not sharded).
    shard: Option<shards::Shard>,
    /// For a shard: moves a parent labelled with it but hashed elsewhere.
    relabeller: Option<shards::Relabeller>,
    events: Events,
    backoff: Backoff<ParentRef>,
    progress: Progress,
    /// The parents as the host's own latest writes left them.
    last_writes: Arc<status::LastWrites>,
    /// The parents' store (the queue hands a reconcile the copy it held
    /// when the key came due).
    parents: reflector::Store<Compact>,
    metrics: Arc<Metrics>,
    permits: Arc<tokio::sync::Semaphore>,
    /// The guest's shadow queue, across its scopes.
    shadows: Arc<shadow::Queue>,
    protected: ProtectedObjects,
    leadership: Leadership,
    telemetry: Arc<Telemetry>,
    queue: Arc<QueueTracker>,
    /// Background work waiting for room in the queue.
    pacer: Arc<pacer::Pacer>,
}

impl Context {
    fn parent_api(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        apply::api_for(&self.client, &self.kinds.primary.resource, namespace)
    }
}

/// Objects that arrive in a LIST response carry no apiVersion and kind:
/// filled in once, as they enter the cache, so guests and the drift check
/// always see complete objects. The field sets of managedFields go too
/// (often the largest part of an object, and nothing here reads them); the
/// entries stay, so the host can tell a child it created but never applied
/// (`apply::write_child`).
fn typed_events(
    ar: kube::core::ApiResource,
) -> impl FnMut(watcher::Event<DynamicObject>) -> watcher::Event<DynamicObject> {
    move |event| {
        event.modify(|object| {
            object.types.get_or_insert_with(|| kube::core::TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            });
            for entry in object.metadata.managed_fields.iter_mut().flatten() {
                entry.fields_v1 = None;
            }
        })
    }
}

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

/// What a controller needs from the host besides the guest.
#[derive(Clone)]
pub struct Environment {
    /// The client the guest's requests are made with.
    pub client: Client,
    /// The host's own objects.
    pub protected: ProtectedObjects,
    /// Whether this host may write (it reconciles only while it leads).
    pub leadership: Leadership,
    /// Whether the API server answers: every parent is queued again when it
    /// answers after an outage.
    pub api_health: crate::client::ApiHealth,
    /// The host's metrics.
    pub telemetry: Arc<Telemetry>,
    /// The namespace of the host's own objects: related kinds are never
    /// watched there, nor parents and children by a guest of every
    /// namespace.
    pub host_namespace: Option<String>,
    /// The guest's units of work, by shard (one for a guest of one shard):
    /// each scope of a shard reconciles while its unit's leadership says so,
    /// and writes through its client, fenced by it. Empty: the guest's
    /// `client` and `leadership` for every scope.
    pub units: Vec<UnitEnv>,
}

/// One unit of a guest's work as its scopes run it.
#[derive(Clone)]
pub struct UnitEnv {
    /// Whether this host may work on the unit.
    pub leadership: Leadership,
    /// The guest's client, its writes fenced by that leadership.
    pub client: Client,
    /// For a shard of a guest with several: the client that moves parents
    /// to their shards (the same, named apart in the audit log).
    pub labeller: Option<Client>,
    /// The unit's registration, kept while a scope runs.
    pub held: Arc<crate::leader::units::Held>,
}

impl Environment {
    /// The environment of the scopes of `shard`.
    fn for_shard(&self, shard: Option<shards::Shard>) -> Environment {
        let mut env = self.clone();
        if let Some(unit) = self.unit(shard) {
            env.leadership = unit.leadership.clone();
            env.client = unit.client.clone();
        }
        env
    }

    /// The unit of `shard` (the guest's only one for `None`).
    fn unit(&self, shard: Option<shards::Shard>) -> Option<&UnitEnv> {
        self.units.get(shard.map_or(0, |s| usize::from(s.index)))
    }

    /// What moves the parents of the guest to their shards, writing for
    /// `shard`'s unit.
    fn relabeller(
        &self,
        shard: shards::Shard,
        kinds: &ResolvedKinds,
        guest: &str,
    ) -> shards::Relabeller {
        let unit = self.unit(Some(shard));
        shards::Relabeller {
            client: unit
                .and_then(|u| u.labeller.clone())
                .or_else(|| unit.map(|u| u.client.clone()))
                .unwrap_or_else(|| self.client.clone()),
            kinds: kinds.clone(),
            guest: guest.to_owned(),
            count: shard.count,
        }
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
                let labelling = shards::Labelling {
                    relabeller: env.relabeller(first, &kinds, &guest),
                    namespace: namespace.clone(),
                    left_out: left_out(namespace.as_deref(), &env),
                    leadership: leadership.clone(),
                };
                tasks.push(tokio::spawn(shards::keep_labelled(
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
            tasks.push(tokio::spawn(run_scope(
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

/// What the host tells a running scope: queue everything again, or stop.
struct Signals {
    requeue: tokio::sync::broadcast::Receiver<()>,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

/// One namespace scope of a guest's controller.
struct Scope {
    /// The parents' store of the scope's current hold.
    parents: ParentStore,
    /// Set at the parents' first complete list.
    parents_listed: Arc<AtomicBool>,
    /// Parents to reconcile at once, ahead of background work.
    at_once: tokio::sync::mpsc::UnboundedReceiver<ParentRef>,
    /// What each hold of the scope runs with.
    scoped: Scoped,
}

/// The namespace a scope of `namespace` leaves out: the host's own, when
/// the scope is every namespace. A guest of every namespace does not act in
/// the host's: a parent there would have the guest write beside the host's
/// own ServiceAccount and Secrets. An entry that names it explicitly does.
fn left_out(namespace: Option<&str>, env: &Environment) -> Option<String> {
    namespace
        .is_none()
        .then(|| env.host_namespace.clone())
        .flatten()
}

/// The queue key of an object: `namespace/name`.
pub(crate) fn queue_key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}

fn scoped_api<K>(client: &Client, kind: &ResolvedKind, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<
            DynamicType = kube::discovery::ApiResource,
            Scope = kube::core::DynamicResourceScope,
        >,
{
    match namespace {
        Some(ns) if kind.namespaced => Api::namespaced_with(client.clone(), ns, &kind.resource),
        _ => Api::all_with(client.clone(), &kind.resource),
    }
}

/// A scope's parents' store as the rollout and the gauges read it: each
/// hold of the scope fills a store of its own (ready at its first
/// complete list), which replaces the last one; between holds, an empty
/// one.
#[derive(Clone)]
struct ParentStore {
    current: Arc<std::sync::Mutex<reflector::Store<Compact>>>,
    resource: kube::core::ApiResource,
}

impl ParentStore {
    fn new(resource: &kube::core::ApiResource) -> Self {
        let empty = reflector::store::Writer::<Compact>::new(resource.clone()).as_reader();
        Self {
            current: Arc::new(std::sync::Mutex::new(empty)),
            resource: resource.clone(),
        }
    }

    /// The store of the current hold.
    fn current(&self) -> reflector::Store<Compact> {
        self.current.lock().expect("parents lock").clone()
    }

    /// A new store for a hold, which the readers see from now on.
    fn renew(&self) -> reflector::store::Writer<Compact> {
        let writer = reflector::store::Writer::new(self.resource.clone());
        *self.current.lock().expect("parents lock") = writer.as_reader();
        writer
    }

    /// An empty store in place of the last hold's.
    fn empty(&self) {
        drop(self.renew());
    }
}

/// Runs a scope: for a guest of one shard, once, its caches kept warm on a
/// standby; for a shard, each time this host holds it, its watches started
/// when it takes the shard and stopped, its caches emptied, when it lets it
/// go. A replica caches only the shards it holds.
async fn run_scope(scope: Scope, signals: Signals) {
    let Scope {
        parents,
        parents_listed,
        at_once,
        scoped,
    } = scope;
    let Scoped {
        env,
        slot,
        kinds,
        shard,
        queue,
        synced,
        ..
    } = &scoped;
    let shard = *shard;
    let Signals {
        requeue,
        mut shutdown,
    } = signals;
    let guest_name = slot.current().name().to_string();
    let at_once = Arc::new(tokio::sync::Mutex::new(at_once));
    let empty = || Arc::new(ChildIndex::new(kinds.children.len()));
    let children = Arc::new(std::sync::Mutex::new(empty()));
    let report = {
        let kind_names: Vec<String> = std::iter::once(&kinds.primary)
            .chain(&kinds.children)
            .map(|k| k.resource.kind.clone())
            .collect();
        let report = cached::Report::new(
            &env.telemetry,
            &guest_name,
            &kind_names,
            shard.map_or(0, |s| s.index),
        );
        let (store, counted) = (parents.clone(), children.clone());
        tokio::spawn(report.follow(
            move || {
                let index = counted.lock().expect("children lock").clone();
                std::iter::once(store.current().state().len())
                    .chain(index.counts())
                    .collect()
            },
            env.leadership.clone(),
        ))
    };
    let held_only = shard.is_some();
    if held_only {
        // Readiness does not wait for the caches of shards: a replica that
        // holds none has none to fill.
        synced.store(true, Ordering::Release);
    }
    let mut leading = env.leadership.subscribe();
    loop {
        if held_only {
            tokio::select! {
                led = leading.wait_for(|leads| *leads) => if led.is_err() { break },
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        let index = empty();
        *children.lock().expect("children lock") = index.clone();
        let stop = || {
            let (mut shutdown, mut leading) = (shutdown.clone(), leading.clone());
            async move {
                tokio::select! {
                    _ = shutdown.wait_for(|stop| *stop) => {}
                    _ = leading.wait_for(|leads| !*leads), if held_only => {}
                }
            }
        };
        parents_listed.store(false, Ordering::Release);
        let held = Held {
            parents: parents.renew(),
            parents_listed: parents_listed.clone(),
            at_once: at_once.clone(),
            children: index,
            requeue: requeue.resubscribe(),
            shutdown: shutdown.clone(),
        };
        hold(held, stop, &scoped).await;
        if !held_only || *shutdown.borrow() {
            break;
        }
        // The shard went to another replica: what its caches held goes,
        // and so do its parents' keys still waiting in the queue (the
        // work-queue gauges).
        for parent in parents.current().state() {
            queue.forget(&queue_key(
                parent.metadata.namespace.as_deref(),
                &parent.name_any(),
            ));
        }
        parents.empty();
        parents_listed.store(false, Ordering::Release);
        *children.lock().expect("children lock") = empty();
        tracing::info!(guest = %guest_name, shard = shard.map_or(0, |s| s.index), "shard let go, its caches emptied");
    }
    report.abort();
}

/// What one hold of a scope starts with.
struct Held {
    /// The hold's parents' store.
    parents: reflector::store::Writer<Compact>,
    parents_listed: Arc<AtomicBool>,
    at_once: Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<ParentRef>>>,
    /// This hold's index of the children.
    children: Arc<ChildIndex>,
    requeue: tokio::sync::broadcast::Receiver<()>,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

/// What a scope is, for each of its holds.
struct Scoped {
    env: Environment,
    slot: GuestSlot,
    kinds: ResolvedKinds,
    settings: ControllerSettings,
    /// The scope's namespace (`None`: all).
    namespace: Option<String>,
    /// The shard this scope reconciles (`None`: the guest is not sharded).
    shard: Option<shards::Shard>,
    permits: Arc<tokio::sync::Semaphore>,
    shadows: Arc<shadow::Queue>,
    metrics: Arc<Metrics>,
    queue: Arc<QueueTracker>,
    synced: Arc<AtomicBool>,
}

/// One hold of a scope: its watches, its queue and its reconciles, until
/// `stop` says (running reconciles finish).
async fn hold<F>(held: Held, stop: impl Fn() -> F, scope: &Scoped)
where
    F: std::future::Future<Output = ()> + Send + Sync + 'static,
{
    let Held {
        parents: parent_writer,
        parents_listed,
        at_once,
        children,
        requeue,
        shutdown,
    } = held;
    let Scoped {
        env,
        slot,
        kinds,
        settings,
        namespace,
        shard,
        permits,
        shadows,
        metrics,
        queue,
        synced,
    } = scope;
    let (ns, shard) = (namespace.as_deref(), *shard);
    let client = env.client.clone();
    let guest_name = slot.current().name().to_string();
    let parent_reader = parent_writer.as_reader();
    let related = Arc::new(RelatedIndex::new(
        kinds.related.iter().map(|(_, r)| r.clone()).collect(),
    ));
    let pacer = Arc::new(pacer::Pacer::new(usize::from(settings.concurrency)));
    let last_writes = Arc::new(status::LastWrites::default());
    let queueing = triggers::Queueing {
        telemetry: env.telemetry.clone(),
        queue: queue.clone(),
        pacer: pacer.clone(),
        primary: kinds.primary.resource.clone(),
        parents: parent_reader.clone(),
    };
    let left_out_ns = left_out(ns, env);
    let watched = triggers::Watched {
        client: &client,
        kinds,
        namespace: ns,
        left_out: left_out_ns.as_deref(),
        shard,
    };
    let parent_stream = triggers::parents(
        &watched,
        parent_writer,
        // Set at the parents' first complete list (the store's own
        // readiness future wakes only one waiter, and the controller waits
        // on it).
        parents_listed.clone(),
        related.clone(),
        &last_writes,
        queueing.clone(),
    );
    let selector = format!("{GUEST_LABEL}={guest_name}");
    let mut child_streams: Vec<_> = (0..kinds.children.len())
        .map(|i| triggers::children(&watched, i, &selector, children.clone(), queueing.clone()))
        .collect();
    let related_streams: Vec<_> = (0..kinds.related.len())
        .map(|i| {
            triggers::related(
                &watched,
                i,
                env.host_namespace.as_deref(),
                related.clone(),
                !settings.secret_values,
                queueing.clone(),
            )
        })
        .collect();

    let ctx = Arc::new(Context {
        field_manager: field_manager(&guest_name),
        host_manager: host_field_manager(&guest_name),
        events: Events::new(client.clone(), &guest_name).fenced_by(env.leadership.clone()),
        guest_name: guest_name.clone(),
        client: client.clone(),
        slot: slot.clone(),
        child_kind_names: kinds.children.iter().map(|k| k.kind.to_string()).collect(),
        related: related.clone(),
        related_kind_names: kinds
            .related
            .iter()
            .map(|(k, _)| k.kind.to_string())
            .collect(),
        scope: ns.map(str::to_owned),
        shard,
        relabeller: shard.map(|s| env.relabeller(s, kinds, &guest_name)),
        kinds: kinds.clone(),
        settings: settings.clone(),
        children,
        backoff: Backoff::default(),
        progress: Progress::default(),
        last_writes,
        parents: parent_reader.clone(),
        metrics: metrics.clone(),
        permits: permits.clone(),
        shadows: shadows.clone(),
        protected: env.protected.clone(),
        leadership: env.leadership.clone(),
        telemetry: env.telemetry.clone(),
        queue: queue.clone(),
        pacer: pacer.clone(),
    });

    let sweeper = tokio::spawn(sweep(ctx.clone(), shutdown));
    let watcher_sync = tokio::spawn(report_synced(
        parents_listed.clone(),
        ctx.clone(),
        synced.clone(),
    ));
    let requeues = {
        let ctx = ctx.clone();
        triggers::every_parent(
            settings.resync,
            &env.leadership,
            &env.api_health,
            move || ctx.backoff.clear(),
            requeue,
            queueing.clone(),
        )
    };
    let at_once = triggers::at_once(at_once, queueing);
    let mut controller =
        Controller::for_stream_with(parent_stream, parent_reader, kinds.primary.resource.clone())
            .with_config(ControllerConfig::default().concurrency(settings.concurrency))
            .reconcile_on(at_once);
    // Children's changes and the requeues of every parent reach the queue
    // through the pacer; their streams are driven here and yield nothing.
    child_streams.push(requeues.boxed());
    controller = controller
        .reconcile_on(futures::stream::select_all(child_streams))
        .reconcile_on(pacer.admitted());
    if !related_streams.is_empty() {
        controller = controller.reconcile_on(futures::stream::select_all(related_streams));
    }
    let finishing = ctx.clone();
    tracing::info!(guest = %guest_name, kind = %kinds.primary.kind, namespace = ns.unwrap_or("<all>"), shard = shard.map(|s| s.index), "controller started");
    let running = controller
        .graceful_shutdown_on(stop())
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(
                    "controller: {}",
                    crate::sink::cut(&e.to_string(), crate::sink::LOG_MESSAGE_BYTES)
                );
            }
        });
    // kube-runtime's controller starts no reconcile before the parents'
    // store is ready, and a graceful shutdown before that never ends: a
    // hold stopped before the parents' first complete list is dropped
    // (nothing runs yet).
    let unlisted = async {
        stop().await;
        if parents_listed.load(Ordering::Acquire) {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = running => {}
        () = unlisted => {}
    }
    sweeper.abort();
    watcher_sync.abort();
    // The counts of Event series not written yet (within the graceful
    // shutdown's time).
    finishing.events.close().await;
}

/// Sets `synced` once the parents and every child kind have their first
/// lists (what `/readyz` waits for).
async fn report_synced(
    parents_listed: Arc<AtomicBool>,
    ctx: Arc<Context>,
    synced: Arc<AtomicBool>,
) {
    while !parents_listed.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    loop {
        let children = ctx
            .children
            .wait_ready(reconcile::CHILD_CACHE_TIMEOUT, &ctx.child_kind_names)
            .await;
        let related = ctx
            .related
            .wait_ready(reconcile::CHILD_CACHE_TIMEOUT, &ctx.related_kind_names)
            .await;
        if children.is_ok() && related.is_ok() {
            synced.store(true, Ordering::Release);
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `event` with `f` applied to its object, if it has one.
fn map_object<A, B>(event: watcher::Event<A>, mut f: impl FnMut(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Forgets, every [`SWEEP_PERIOD`], the backoff and progress records of
/// parents that are gone, so memory follows the live objects.
async fn sweep(ctx: Arc<Context>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let parents = &ctx.parents;
    loop {
        tokio::select! {
            () = tokio::time::sleep(SWEEP_PERIOD) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let state = parents.state();
        let live: std::collections::HashSet<String> =
            state.iter().filter_map(|p| p.uid()).collect();
        // A write whose watch event arrived before its answer (so `seen`
        // found nothing to forget yet) is forgotten here.
        for parent in &state {
            ctx.last_writes.seen(&parent.metadata);
        }
        ctx.progress.retain(|uid| live.contains(uid));
        ctx.last_writes.retain(|uid| live.contains(uid));
        ctx.backoff.retain(|key| parents.get(key).is_some());
        let primary = &ctx.kinds.primary.resource;
        // Triggers of children and related objects whose parent is gone
        // (garbage collection deleting its children) never run.
        let keys: std::collections::HashSet<String> = state
            .iter()
            .map(|p| queue_key(p.metadata.namespace.as_deref(), &p.name_any()))
            .collect();
        drop(state);
        // Only this scope's keys: the guest's other namespaces and shards
        // share the queue's gauges.
        let prefix = ctx.scope.as_deref().map(|ns| format!("{ns}/"));
        let ours = |key: &str| {
            let (ns, name) = key.split_once('/').unwrap_or(("", key));
            prefix.as_deref().is_none_or(|p| key.starts_with(p))
                && ctx
                    .shard
                    .is_none_or(|s| s.owns(Some(ns).filter(|ns| !ns.is_empty()), name))
        };
        ctx.queue.retain(|key| keys.contains(key) || !ours(key));
        ctx.related.retain_parents(|(ns, name)| {
            parents
                .get(&parent_ref(primary, ns.as_deref(), name))
                .is_some()
        });
    }
}
