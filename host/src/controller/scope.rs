//! One scope of a guest's controller (a namespace, or every one, and a
//! shard): its watches, its caches, its queue and its reconciles, each time
//! this replica holds it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector;

use super::backoff::Backoff;
use super::cached;
use super::compact::{Compact, ParentRef, parent_ref};
use super::context::{Context, Metrics, queue_key};
use super::discovery::ResolvedKinds;
use super::environment::{Environment, left_out};
use super::index::ChildIndex;
use super::last_writes::LastWrites;
use super::pacer::Pacer;
use super::progress::Progress;
use super::reconcile::{self, CHILD_CACHE_TIMEOUT};
use super::related::RelatedIndex;
use super::shadow;
use super::shards::Shard;
use super::triggers;
use super::watched::Watched;
use crate::events::Events;
use crate::rollout::GuestSlot;
use crate::settings::ControllerSettings;
use crate::telemetry::QueueTracker;
use crate::validate::GUEST_LABEL;
use wasmop_contract::names::{field_manager, host_field_manager};

/// How often a controller forgets the backoff and progress records of
/// parents that are gone.
const SWEEP_PERIOD: Duration = Duration::from_secs(60);

/// What the host tells a running scope: queue everything again, or stop.
pub(super) struct Signals {
    pub(super) requeue: tokio::sync::broadcast::Receiver<()>,
    pub(super) shutdown: tokio::sync::watch::Receiver<bool>,
}

/// One namespace scope of a guest's controller.
pub(super) struct Scope {
    /// The parents' store of the scope's current hold.
    pub(super) parents: ParentStore,
    /// Set at the parents' first complete list.
    pub(super) parents_listed: Arc<AtomicBool>,
    /// Parents to reconcile at once, ahead of background work.
    pub(super) at_once: tokio::sync::mpsc::UnboundedReceiver<ParentRef>,
    /// What each hold of the scope runs with.
    pub(super) scoped: Scoped,
}

/// A scope's parents' store as the rollout and the gauges read it: each
/// hold of the scope fills a store of its own (ready at its first
/// complete list), which replaces the last one; between holds, an empty
/// one.
#[derive(Clone)]
pub(super) struct ParentStore {
    current: Arc<std::sync::Mutex<reflector::Store<Compact>>>,
    resource: kube::core::ApiResource,
}

impl ParentStore {
    pub(super) fn new(resource: &kube::core::ApiResource) -> Self {
        let empty = reflector::store::Writer::<Compact>::new(resource.clone()).as_reader();
        Self {
            current: Arc::new(std::sync::Mutex::new(empty)),
            resource: resource.clone(),
        }
    }

    /// The store of the current hold.
    pub(super) fn current(&self) -> reflector::Store<Compact> {
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
pub(super) async fn run_scope(scope: Scope, signals: Signals) {
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
pub(super) struct Scoped {
    pub(super) env: Environment,
    pub(super) slot: GuestSlot,
    pub(super) kinds: ResolvedKinds,
    pub(super) settings: ControllerSettings,
    /// The scope's namespace (`None`: all).
    pub(super) namespace: Option<String>,
    /// The shard this scope reconciles (`None`: the guest is not sharded).
    pub(super) shard: Option<Shard>,
    pub(super) permits: Arc<tokio::sync::Semaphore>,
    pub(super) shadows: Arc<shadow::Queue>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) queue: Arc<QueueTracker>,
    pub(super) synced: Arc<AtomicBool>,
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
    let pacer = Arc::new(Pacer::new(usize::from(settings.concurrency)));
    let last_writes = Arc::new(LastWrites::default());
    let queueing = triggers::Queueing {
        queue: queue.clone(),
        pacer: pacer.clone(),
        primary: kinds.primary.resource.clone(),
        parents: parent_reader.clone(),
    };
    let left_out_ns = left_out(ns, env);
    let watched = Watched {
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

    let events =
        Arc::new(Events::new(client.clone(), &guest_name).fenced_by(env.leadership.clone()));
    let (wake, woken) = tokio::sync::mpsc::unbounded_channel();
    let customized = super::customized::Customized::new(
        client.clone(),
        wake,
        ns.map(str::to_owned),
        env.host_namespace.clone(),
        !settings.secret_values,
    );
    let ctx = Arc::new(Context {
        field_manager: field_manager(&guest_name),
        host_manager: host_field_manager(&guest_name),
        shadow: shadow::Sink {
            queue: shadows.clone(),
            guest: guest_name.clone(),
            events: events.clone(),
            telemetry: env.telemetry.clone(),
            protected: env.protected.clone(),
            primary: kinds.primary.resource.clone(),
        },
        events,
        guest_name: guest_name.clone(),
        client: client.clone(),
        slot: slot.clone(),
        child_kind_names: kinds.children.iter().map(|k| k.kind.to_string()).collect(),
        related: related.clone(),
        customized,
        adoption: Default::default(),
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
    let customized = triggers::customized(woken, queueing.clone());
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
    controller = controller.reconcile_on(customized);

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
            .wait_ready(CHILD_CACHE_TIMEOUT, &ctx.child_kind_names, |_| true)
            .await;
        let related = ctx
            .related
            .wait_ready(CHILD_CACHE_TIMEOUT, &ctx.related_kind_names, |_| true)
            .await;
        if children.is_ok() && related.is_ok() {
            synced.store(true, Ordering::Release);
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
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
        ctx.customized.retain(|key| parents.get(key).is_some());
        ctx.adoption.retain(|uid| live.contains(uid));
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
