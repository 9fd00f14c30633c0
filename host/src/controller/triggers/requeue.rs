//! Every parent again, and the parents a rollout moves.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::Queueing;
use crate::client::ApiHealth;
use crate::controller::compact::ParentRef;
use crate::leader::Leadership;

/// Every parent in the store, as background work through the pacer: every
/// `resync`, on each signal of `requeue` (a swap), when this host becomes
/// the leader of a guest of one shard (a standby's caches are warm; only
/// its reconciles were held back; a shard's hold starts with its list,
/// which queues every parent), and when the API server answers again after an outage (after
/// `api_back`, which forgets the failure counts, so no parent waits out a
/// backoff its failures during the outage built up). It yields nothing.
pub(in crate::controller) fn every_parent(
    resync: Duration,
    leadership: &Leadership,
    api_health: &ApiHealth,
    api_back: impl Fn() + Send + 'static,
    requeue: tokio::sync::broadcast::Receiver<()>,
    queueing: Queueing,
) -> impl Stream<Item = ParentRef> + Send + 'static {
    let became_leader = futures::stream::unfold(leadership.subscribe(), |mut rx| async move {
        loop {
            rx.changed().await.ok()?;
            if *rx.borrow_and_update() {
                return Some(((), rx));
            }
        }
    });
    let recovered = futures::stream::unfold(api_health.recoveries(), |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
    .inspect(move |()| api_back());
    let swapped = futures::stream::unfold(requeue, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(()) => return Some(((), rx)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    futures::stream::select(
        futures::stream::select(
            ticks(resync),
            futures::stream::select(became_leader, recovered),
        ),
        swapped,
    )
    .filter_map(move |()| {
        for parent in queueing.parents.state() {
            queueing.added(parent.metadata.namespace.as_deref(), &parent.name_any());
            queueing
                .pacer
                .push(ObjectRef::from_obj_with(&*parent, queueing.primary.clone()));
        }
        std::future::ready(None::<ParentRef>)
    })
}

/// Parents a rollout moves from one version to the other, received on
/// `moved`: reconciled at once, ahead of background work.
/// The receiver outlives the stream: each hold of a shard reads on.
pub(in crate::controller) fn at_once(
    moved: Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<ParentRef>>>,
    queueing: Queueing,
) -> impl Stream<Item = ParentRef> + Send + 'static {
    futures::stream::unfold(moved, |rx| async move {
        let key = rx.lock().await.recv().await;
        key.map(|key| (key, rx))
    })
    .inspect(move |key: &ParentRef| {
        queueing.added(key.namespace.as_deref(), &key.name);
        queueing.pacer.urgent(key.clone());
    })
}

fn ticks(period: Duration) -> impl Stream<Item = ()> + Send {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(period).await;
        Some(((), ()))
    })
}
