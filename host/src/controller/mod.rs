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
pub mod compact;
pub mod discovery;
pub mod finalizer;
pub mod index;
pub mod pacer;
pub mod progress;
pub mod reconcile;
pub mod related;
mod shadow;
pub mod status;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
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
    scopes: Vec<(
        reflector::Store<Compact>,
        tokio::sync::mpsc::UnboundedSender<ParentRef>,
    )>,
    /// Per scope: whether the parents were listed once.
    listed: Vec<Arc<AtomicBool>>,
    requeue_all: tokio::sync::broadcast::Sender<()>,
    primary: kube::core::ApiResource,
}

impl crate::rollout::ParentSet for Parents {
    fn positions(&self) -> Vec<(String, u64)> {
        self.scopes
            .iter()
            .flat_map(|(store, _)| store.state())
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
            .map(|(store, _)| store.state().len())
            .sum()
    }

    fn requeue_at_once(&self, range: std::ops::RangeInclusive<u64>) {
        for (store, at_once) in &self.scopes {
            for parent in store.state() {
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
    /// watched there.
    pub host_namespace: Option<String>,
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
        for namespace in scopes {
            let flag = Arc::new(AtomicBool::new(false));
            synced.push(flag.clone());
            let parents = reflector::store::Writer::<Compact>::new(kinds.primary.resource.clone());
            let (at_once, at_once_rx) = tokio::sync::mpsc::unbounded_channel();
            parent_scopes.push((parents.as_reader(), at_once));
            let parents_listed = Arc::new(AtomicBool::new(false));
            listed.push(parents_listed.clone());
            tasks.push(tokio::spawn(run_scope(
                Scope {
                    parents,
                    parents_listed,
                    at_once: at_once_rx,
                    env: env.clone(),
                    slot: slot.clone(),
                    kinds: kinds.clone(),
                    settings: settings.clone(),
                    namespace,
                    permits: permits.clone(),
                    shadows: shadows.clone(),
                    metrics: metrics.clone(),
                    queue: queue.clone(),
                    synced: flag,
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
    /// The parents' store.
    parents: reflector::store::Writer<Compact>,
    /// Set at the parents' first complete list.
    parents_listed: Arc<AtomicBool>,
    /// Parents to reconcile at once, ahead of background work.
    at_once: tokio::sync::mpsc::UnboundedReceiver<ParentRef>,
    env: Environment,
    slot: GuestSlot,
    kinds: ResolvedKinds,
    settings: ControllerSettings,
    namespace: Option<String>,
    permits: Arc<tokio::sync::Semaphore>,
    shadows: Arc<shadow::Queue>,
    metrics: Arc<Metrics>,
    queue: Arc<QueueTracker>,
    synced: Arc<AtomicBool>,
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

async fn run_scope(scope: Scope, signals: Signals) {
    let Scope {
        parents: parent_writer,
        parents_listed,
        at_once,
        env,
        slot,
        kinds,
        settings,
        namespace,
        permits,
        shadows,
        metrics,
        queue,
        synced,
    } = scope;
    let Signals {
        requeue,
        mut shutdown,
    } = signals;
    let client = env.client.clone();
    let guest_name = slot.current().name().to_string();
    let ns = namespace.as_deref();
    let parent_reader = parent_writer.as_reader();
    let parent_kind = kinds.primary.kind.to_string();
    let (tele, parents_queue) = (env.telemetry.clone(), queue.clone());
    // Set at the parents' first complete list (the store's own readiness
    // future wakes only one waiter, and the controller waits on it).
    let listed = parents_listed.clone();
    let related = Arc::new(RelatedIndex::new(
        kinds.related.iter().map(|(_, r)| r.clone()).collect(),
    ));
    let parents_related = related.clone();
    let pacer = Arc::new(pacer::Pacer::new(usize::from(settings.concurrency)));
    // Parent events that are background work, marked before the store
    // learns them: a parent seen for the first time (listed, or created),
    // or a version the host wrote itself (its finalizer).
    let background: Arc<Mutex<HashSet<ParentRef>>> = Arc::default();
    let (seen_before, mark) = (parent_writer.as_reader(), background.clone());
    let primary_resource = kinds.primary.resource.clone();
    let last_writes = Arc::new(status::LastWrites::default());
    let (own_writes, seen_writes) = (last_writes.clone(), last_writes.clone());
    let parent_stream = watcher(
        scoped_api(&client, &kinds.primary, ns),
        watcher::Config::default(),
    )
    .map_ok(typed_events(kinds.primary.resource.clone()))
    .backoff(crate::retry::watch_backoff())
    .inspect_ok(move |event| match event {
        watcher::Event::InitDone => listed.store(true, Ordering::Release),
        watcher::Event::Apply(parent) | watcher::Event::InitApply(parent) => {
            parents_related.parent_applied(parent);
            let key = compact::key_of(parent, &primary_resource);
            let initial = matches!(event, watcher::Event::InitApply(_));
            let mut marks = mark.lock().expect("background lock");
            if initial || seen_before.get(&key).is_none() || own_writes.is_own(&parent.metadata) {
                marks.insert(key);
            } else {
                // A mark the spec predicate left (a re-list of an unchanged
                // parent) does not make its next change background work.
                marks.remove(&key);
            }
        }
        watcher::Event::Delete(parent) => {
            parents_related.parent_deleted(parent);
            let key = compact::key_of(parent, &primary_resource);
            mark.lock().expect("background lock").remove(&key);
        }
        watcher::Event::Init => {}
    })
    .inspect_err(
        move |e| tracing::warn!(kind = %parent_kind, "watch of the parents failed, retrying: {e}"),
    )
    .map_ok(|event| map_object(event, Compact::from))
    .reflect(parent_writer)
    .inspect_ok(move |event| {
        // The store holds this version now.
        if let watcher::Event::Apply(parent) | watcher::Event::InitApply(parent) = event {
            seen_writes.seen(&parent.metadata);
        }
    })
    .applied_objects()
    .predicate_filter(
        |parent: &Compact| Some(parent.spec_hash()),
        Default::default(),
    )
    .inspect_ok(move |parent| {
        let key = queue_key(parent.metadata.namespace.as_deref(), &parent.name_any());
        parents_queue.add(&tele, key, Duration::ZERO);
    })
    .try_filter({
        let (pacer, primary) = (pacer.clone(), kinds.primary.resource.clone());
        move |parent| {
            let key = ObjectRef::from_obj_with(parent, primary.clone());
            let paced = background.lock().expect("background lock").remove(&key);
            if paced {
                pacer.push(key);
            } else {
                pacer.urgent(key);
            }
            std::future::ready(!paced)
        }
    });

    let selector = format!("{GUEST_LABEL}={guest_name}");
    let children = Arc::new(ChildIndex::new(kinds.children.len()));
    let mut child_streams = Vec::new();
    for (i, kind) in kinds.children.iter().enumerate() {
        let index = children.clone();
        let name = kind.kind.to_string();
        let (tele, children_queue) = (env.telemetry.clone(), queue.clone());
        let primary = kinds.primary.resource.clone();
        let child_parents = parent_reader.clone();
        let child_pacer = pacer.clone();
        let parent_namespaced = kinds.primary.namespaced;
        let stream = watcher(
            scoped_api(&client, kind, ns),
            watcher::Config::default().labels(&selector),
        )
        .map_ok(typed_events(kind.resource.clone()))
        .backoff(crate::retry::watch_backoff())
        .inspect(move |event| match event {
            Ok(event) => index.apply(i, event),
            Err(e) => {
                tracing::warn!(kind = %name, "watch of a child kind failed, retrying: {e}");
                index.fail(i, e.to_string());
            }
        })
        .touched_objects()
        .filter(|object| std::future::ready(object.is_ok()))
        .inspect_ok(move |child| {
            // The parent to queue: the child's controller ownerReference.
            if let Some(owner) = child.owner_references().iter().find(|o| {
                o.controller == Some(true)
                    && o.kind == primary.kind
                    && o.api_version == primary.api_version
            }) {
                // A cluster-scoped parent's ref has no namespace.
                let namespace = child
                    .metadata
                    .namespace
                    .as_deref()
                    .filter(|_| parent_namespaced);
                // Garbage collection of a deleted parent's children is no
                // work for the queue.
                let parent = parent_ref(&primary, namespace, &owner.name);
                if child_parents.get(&parent).is_some() {
                    children_queue.add(&tele, queue_key(namespace, &owner.name), Duration::ZERO);
                    child_pacer.push(parent);
                }
            }
        })
        .filter_map(|_| std::future::ready(None::<ParentRef>));
        child_streams.push(stream.boxed());
    }

    let mut related_streams = Vec::new();
    for (i, (kind, declared)) in kinds.related.iter().enumerate() {
        let index = related.clone();
        let name = kind.kind.to_string();
        let (tele, related_queue) = (env.telemetry.clone(), queue.clone());
        let primary = kinds.primary.resource.clone();
        let conceal = !settings.secret_values;
        let stream = related_events(
            &client,
            kind,
            ns,
            declared.metadata_only,
            env.host_namespace.as_deref(),
        )
        .map_ok(typed_events(kind.resource.clone()))
        .map_ok(move |event| {
            if conceal {
                event.modify(crate::secrets::conceal_object)
            } else {
                event
            }
        })
        .backoff(crate::retry::watch_backoff())
        .filter_map(move |event| {
            let parents = match event {
                Ok(event) => index.apply(i, event),
                Err(e) => {
                    tracing::warn!(kind = %name, "watch of a related kind failed, retrying: {e}");
                    index.fail(i, e.to_string());
                    Vec::new()
                }
            };
            std::future::ready(Some(futures::stream::iter(parents)))
        })
        .flatten()
        .map(move |(namespace, name)| {
            related_queue.add(
                &tele,
                queue_key(namespace.as_deref(), &name),
                Duration::ZERO,
            );
            parent_ref(&primary, namespace.as_deref(), &name)
        });
        related_streams.push(stream.boxed());
    }

    let ctx = Arc::new(Context {
        field_manager: field_manager(&guest_name),
        host_manager: host_field_manager(&guest_name),
        events: Events::new(client.clone(), &guest_name).fenced_by(env.leadership.clone()),
        guest_name: guest_name.clone(),
        client,
        slot,
        child_kind_names: kinds.children.iter().map(|k| k.kind.to_string()).collect(),
        related: related.clone(),
        related_kind_names: kinds
            .related
            .iter()
            .map(|(k, _)| k.kind.to_string())
            .collect(),
        scope: namespace.clone(),
        kinds: kinds.clone(),
        settings: settings.clone(),
        children,
        backoff: Backoff::default(),
        progress: Progress::default(),
        last_writes: last_writes.clone(),
        parents: parent_reader.clone(),
        metrics,
        permits,
        shadows,
        protected: env.protected,
        leadership: env.leadership.clone(),
        telemetry: env.telemetry.clone(),
        queue: queue.clone(),
        pacer: pacer.clone(),
    });

    let sweeper = tokio::spawn(sweep(ctx.clone(), shutdown.clone()));
    let watcher_sync = tokio::spawn(report_synced(parents_listed, ctx.clone(), synced));
    let resync = settings.resync;
    // Every parent again: on each resync, after a swap, and when this host
    // becomes the leader (a standby's caches are warm; only its reconciles
    // were held back).
    let became_leader = futures::stream::unfold(env.leadership.subscribe(), |mut rx| async move {
        loop {
            rx.changed().await.ok()?;
            if *rx.borrow_and_update() {
                return Some(((), rx));
            }
        }
    });
    // ... and when the API server answers again after an outage, with the
    // failure counts forgotten, so no parent waits out a backoff its
    // failures during the outage built up.
    let api_back = {
        let ctx = ctx.clone();
        futures::stream::unfold(env.api_health.recoveries(), |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
        .inspect(move |()| ctx.backoff.clear())
    };
    let all_queue = queue.clone();
    let all_store = parent_reader.clone();
    let tele = env.telemetry.clone();
    let triggers = futures::stream::select(
        futures::stream::select(
            ticks(resync),
            futures::stream::select(became_leader, api_back),
        ),
        futures::stream::unfold(requeue, |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(()) => return Some(((), rx)),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        }),
    )
    .filter_map({
        let (pacer, primary) = (pacer.clone(), kinds.primary.resource.clone());
        move |()| {
            for parent in all_store.state() {
                let key = queue_key(parent.metadata.namespace.as_deref(), &parent.name_any());
                all_queue.add(&tele, key, Duration::ZERO);
                pacer.push(ObjectRef::from_obj_with(&*parent, primary.clone()));
            }
            std::future::ready(None::<ParentRef>)
        }
    });

    // Parents a rollout moves from one version to the other: reconciled at
    // once, ahead of background work.
    let at_once = {
        let (pacer, tele, queue) = (pacer.clone(), env.telemetry.clone(), queue.clone());
        futures::stream::unfold(at_once, |mut rx| async move {
            rx.recv().await.map(|key| (key, rx))
        })
        .inspect(move |key: &ParentRef| {
            queue.add(
                &tele,
                queue_key(key.namespace.as_deref(), &key.name),
                Duration::ZERO,
            );
            pacer.urgent(key.clone());
        })
    };
    let mut controller =
        Controller::for_stream_with(parent_stream, parent_reader, kinds.primary.resource.clone())
            .with_config(ControllerConfig::default().concurrency(settings.concurrency))
            .reconcile_on(at_once);
    // Children's changes and the requeues of every parent reach the queue
    // through the pacer; their streams are driven here and yield nothing.
    child_streams.push(triggers.boxed());
    controller = controller
        .reconcile_on(futures::stream::select_all(child_streams))
        .reconcile_on(pacer.admitted());
    if !related_streams.is_empty() {
        controller = controller.reconcile_on(futures::stream::select_all(related_streams));
    }
    tracing::info!(guest = %guest_name, kind = %kinds.primary.kind, namespace = ns.unwrap_or("<all>"), "controller started");
    controller
        .graceful_shutdown_on(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(
                    "controller: {}",
                    crate::sink::cut(&e.to_string(), crate::sink::LOG_MESSAGE_BYTES)
                );
            }
        })
        .await;
    sweeper.abort();
    watcher_sync.abort();
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

/// A related kind's watch events: whole objects, or only their metadata
/// (as objects with no data).
fn related_events(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
    metadata_only: bool,
    host_namespace: Option<&str>,
) -> futures::stream::BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>> {
    // Nothing in the host's own namespace (its pull and certificate
    // Secrets, its guest list) is ever related: the API server leaves it
    // out of the list and the watch.
    let config = match host_namespace {
        Some(host) => watcher::Config::default().fields(&format!("metadata.namespace!={host}")),
        None => watcher::Config::default(),
    };
    if !metadata_only {
        let api: Api<DynamicObject> = scoped_api(client, kind, namespace);
        return watcher(api, config).boxed();
    }
    let api: Api<kube::core::PartialObjectMeta<DynamicObject>> =
        scoped_api(client, kind, namespace);
    let types = kube::core::TypeMeta {
        api_version: kind.resource.api_version.clone(),
        kind: kind.resource.kind.clone(),
    };
    let whole = move |meta: kube::core::PartialObjectMeta<DynamicObject>| DynamicObject {
        types: Some(types.clone()),
        metadata: meta.metadata,
        data: serde_json::json!({}),
    };
    watcher(api, config)
        .map_ok(move |event| map_object(event, &whole))
        .boxed()
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
        let prefix = ctx.scope.as_deref().map(|ns| format!("{ns}/"));
        ctx.queue.retain(|key| {
            keys.contains(key) || prefix.as_deref().is_some_and(|p| !key.starts_with(p))
        });
        ctx.related.retain_parents(|(ns, name)| {
            parents
                .get(&parent_ref(primary, ns.as_deref(), name))
                .is_some()
        });
    }
}

fn ticks(period: Duration) -> impl Stream<Item = ()> + Send {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(period).await;
        Some(((), ()))
    })
}
