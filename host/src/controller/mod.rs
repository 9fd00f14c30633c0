//! The generic controller that drives one guest.
//!
//! watch → queue → guest call → validate → apply → status. For every guest
//! the host watches the primary kind and each declared child kind (children
//! selected by the `wasmop.dev/guest` label, mapped to their parent through
//! the controller ownerReference). kube-runtime's controller provides the
//! queue: keys are deduplicated, one key never runs twice at once, and
//! concurrency is bounded per guest. The host adds per-key exponential
//! backoff ([`backoff`]), a predicate that ignores status-only changes of the
//! parent, periodic resync and "reconcile everything" after a hot swap.

pub mod apply;
pub mod backoff;
pub mod discovery;
pub mod events;
pub mod finalizer;
pub mod reconcile;
mod slot;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Client, ResourceExt};

pub use discovery::{ResolvedKind, ResolvedKinds};
pub use slot::GuestSlot;

use crate::validate::GUEST_LABEL;
use backoff::Backoff;
use events::Events;

/// How one guest's controller runs.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// Reconciles of this guest that may run at once. Default 4: two cores
    /// here, and a guest call is CPU-bound for microseconds while API writes
    /// wait on the network, so a little more than the core count.
    pub concurrency: u16,
    /// Reconcile every parent this often even if nothing changed. Default
    /// 10 minutes; a converged object costs only reads then.
    pub resync: Duration,
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
}

impl Default for ControllerSettings {
    fn default() -> Self {
        Self {
            concurrency: 4,
            resync: Duration::from_secs(600),
            namespaces: Vec::new(),
        }
    }
}

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
    children: Vec<Store<DynamicObject>>,
    /// Resolves once every child cache has its initial list. Shared, because
    /// `Store::wait_until_ready` wakes only one of several concurrent
    /// waiters (its oneshot keeps a single waker), which stalled reconciles.
    children_ready: futures::future::Shared<futures::future::BoxFuture<'static, bool>>,
    events: Events,
    backoff: Backoff<ObjectRef<DynamicObject>>,
    metrics: Arc<Metrics>,
}

impl Context {
    fn parent_api(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        apply::api_for(&self.client, &self.kinds.primary.resource, namespace)
    }

    /// Children in the caches whose controller ownerReference is `parent`,
    /// with the index of their kind.
    fn observed_children(&self, parent: &DynamicObject) -> Vec<(usize, Arc<DynamicObject>)> {
        let Some(uid) = parent.uid() else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for (index, store) in self.children.iter().enumerate() {
            for child in store.state() {
                let owned = child
                    .owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.uid == uid);
                if owned {
                    found.push((index, child));
                }
            }
        }
        // Stable order: the guest sees the same input for the same state.
        found.sort_by_key(|(kind, child)| (*kind, child.name_any()));
        found
    }
}

/// Objects that arrive in a LIST response carry no apiVersion and kind.
/// Filling them in once, as they enter the cache, means guests and the
/// drift check always see complete objects.
fn typed_events(
    ar: kube::core::ApiResource,
) -> impl FnMut(watcher::Event<DynamicObject>) -> watcher::Event<DynamicObject> {
    move |event| {
        event.modify(|object| {
            object.types.get_or_insert_with(|| kube::core::TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            });
        })
    }
}

/// The field manager the host applies a guest's children and status with.
pub fn field_manager(guest: &str) -> String {
    format!("wasmop-{guest}")
}

/// A running controller for one guest; dropping it does not stop it, call
/// [`RunningController::stop`].
pub struct RunningController {
    requeue_all: tokio::sync::broadcast::Sender<()>,
    shutdown: tokio::sync::watch::Sender<bool>,
    metrics: Arc<Metrics>,
}

impl RunningController {
    /// Starts the watches and the queue for the guest in `slot`.
    pub fn start(
        client: Client,
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
        // One requeue-all signal and one shutdown signal reach every
        // namespace scope of the guest.
        let (requeue_all, _) = tokio::sync::broadcast::channel::<()>(16);
        let (shutdown, _) = tokio::sync::watch::channel(false);
        for namespace in scopes {
            tokio::spawn(run_scope(
                client.clone(),
                slot.clone(),
                kinds.clone(),
                settings.clone(),
                namespace,
                Signals {
                    requeue: requeue_all.subscribe(),
                    shutdown: shutdown.subscribe(),
                },
                metrics.clone(),
            ));
        }
        Self {
            requeue_all,
            shutdown,
            metrics,
        }
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
    /// Children are left untouched.
    pub fn stop(self) {
        let _ = self.shutdown.send(true);
    }
}

/// What the host tells a running scope: queue everything again, or stop.
struct Signals {
    requeue: tokio::sync::broadcast::Receiver<()>,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

fn scoped_api(client: &Client, kind: &ResolvedKind, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) if kind.namespaced => Api::namespaced_with(client.clone(), ns, &kind.resource),
        _ => Api::all_with(client.clone(), &kind.resource),
    }
}

/// Hash of everything but the status: the parent's spec, labels,
/// annotations, finalizers and deletion mark. Status-only updates (most of
/// them written by this very host) do not trigger a reconcile.
fn spec_predicate(object: &DynamicObject) -> Option<u64> {
    let mut h = DefaultHasher::new();
    if let Some(data) = object.data.as_object() {
        for (k, v) in data {
            if k != "status" {
                k.hash(&mut h);
                v.to_string().hash(&mut h);
            }
        }
    }
    object.metadata.uid.hash(&mut h);
    object.metadata.generation.hash(&mut h);
    object.metadata.deletion_timestamp.is_some().hash(&mut h);
    predicates::labels(object).hash(&mut h);
    predicates::annotations(object).hash(&mut h);
    predicates::finalizers(object).hash(&mut h);
    Some(h.finish())
}

async fn run_scope(
    client: Client,
    slot: GuestSlot,
    kinds: ResolvedKinds,
    settings: ControllerSettings,
    namespace: Option<String>,
    signals: Signals,
    metrics: Arc<Metrics>,
) {
    let Signals {
        requeue,
        mut shutdown,
    } = signals;
    let guest_name = slot.current().name().to_string();
    let ns = namespace.as_deref();
    let parent_writer =
        reflector::store::Writer::<DynamicObject>::new(kinds.primary.resource.clone());
    let parent_reader = parent_writer.as_reader();
    let parent_stream = watcher(
        scoped_api(&client, &kinds.primary, ns),
        watcher::Config::default(),
    )
    .map_ok(typed_events(kinds.primary.resource.clone()))
    .default_backoff()
    .reflect(parent_writer)
    .applied_objects()
    .predicate_filter(spec_predicate, Default::default());

    let selector = format!("{GUEST_LABEL}={guest_name}");
    let mut child_stores = Vec::new();
    let mut child_streams = Vec::new();
    for kind in &kinds.children {
        let writer = reflector::store::Writer::<DynamicObject>::new(kind.resource.clone());
        let reader = writer.as_reader();
        let stream = watcher(
            scoped_api(&client, kind, ns),
            watcher::Config::default().labels(&selector),
        )
        .map_ok(typed_events(kind.resource.clone()))
        .default_backoff()
        .reflect(writer)
        .touched_objects();
        child_stores.push(reader);
        child_streams.push((stream, kind.resource.clone()));
    }

    let children_ready = {
        let stores = child_stores.clone();
        async move {
            for store in stores {
                if store.wait_until_ready().await.is_err() {
                    return false;
                }
            }
            true
        }
        .boxed()
        .shared()
    };
    let ctx = Arc::new(Context {
        children_ready,
        field_manager: field_manager(&guest_name),
        host_manager: format!("wasmop-host-{guest_name}"),
        events: Events::new(client.clone(), &guest_name),
        guest_name: guest_name.clone(),
        client,
        slot,
        kinds: kinds.clone(),
        children: child_stores,
        backoff: Backoff::default(),
        metrics,
    });

    let resync = settings.resync;
    let triggers = futures::stream::select(
        ticks(resync),
        futures::stream::unfold(requeue, |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(()) => return Some(((), rx)),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        }),
    );

    let mut controller =
        Controller::for_stream_with(parent_stream, parent_reader, kinds.primary.resource.clone())
            .with_config(ControllerConfig::default().concurrency(settings.concurrency));
    for (stream, ar) in child_streams {
        controller = controller.owns_stream_with(stream, ar);
    }
    tracing::info!(guest = %guest_name, kind = %kinds.primary.kind, namespace = ns.unwrap_or("<all>"), "controller started");
    controller
        .reconcile_all_on(triggers)
        .graceful_shutdown_on(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!("controller: {e}");
            }
        })
        .await;
}

fn ticks(period: Duration) -> impl Stream<Item = ()> + Send {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(period).await;
        Some(((), ()))
    })
}
