//! Background work waits its turn; a user's change does not.
//!
//! kube-runtime's queue runs keys in the order they became due, with no
//! priorities: when a thousand new parents are converging, or a resync or
//! the initial list queues every parent, a change a user makes to one
//! existing parent runs after all of them (52 s at N = 1,000 in the scale
//! bench). So the host hands the queue only a few background keys at a
//! time. Background work is: parents seen for the first time (created, or
//! listed at start), their children's changes, resyncs and the requeue of
//! every parent (swap, leadership, the API server back). A spec change of
//! a parent the host already knew goes to the queue at once, and so do
//! changes of related objects. Background keys wait here, deduplicated, in
//! arrival order, and enter the queue while fewer than `limit` keys are
//! due in it; the queue is never left idle while work waits here.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;

use crate::telemetry::QueueTracker;

/// How often a full queue is looked at again.
const RECHECK: Duration = Duration::from_millis(5);

/// The background keys of one controller scope.
pub struct Pacer {
    waiting: Mutex<Waiting>,
    wake: tokio::sync::Notify,
    queue: Arc<QueueTracker>,
    limit: usize,
}

#[derive(Default)]
struct Waiting {
    order: VecDeque<ObjectRef<DynamicObject>>,
    keys: HashSet<ObjectRef<DynamicObject>>,
}

impl Pacer {
    /// Background keys enter `queue` while fewer than `limit` are due in it.
    pub fn new(queue: Arc<QueueTracker>, limit: usize) -> Self {
        Self {
            waiting: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            queue,
            limit: limit.max(1),
        }
    }

    /// Queues `key` as background work (once, however often it is pushed
    /// before it enters the queue).
    pub fn push(&self, key: ObjectRef<DynamicObject>) {
        let mut waiting = self.waiting.lock().expect("pacer lock");
        if waiting.keys.insert(key.clone()) {
            waiting.order.push_back(key);
        }
        drop(waiting);
        self.wake.notify_one();
    }

    /// How many keys wait here.
    pub fn len(&self) -> usize {
        self.waiting.lock().expect("pacer lock").order.len()
    }

    /// Whether no key waits here.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next key, if the queue has room for it. Keys waiting here count
    /// as due in the queue's tracker already (their trigger was recorded
    /// when it came), so they are taken off its depth.
    fn admit(&self) -> Option<ObjectRef<DynamicObject>> {
        let mut waiting = self.waiting.lock().expect("pacer lock");
        let in_queue = self.queue.depth().saturating_sub(waiting.order.len());
        if in_queue >= self.limit {
            return None;
        }
        let key = waiting.order.pop_front()?;
        waiting.keys.remove(&key);
        Some(key)
    }

    /// The keys as the queue has room for them, for `reconcile_on`.
    pub fn admitted(self: Arc<Self>) -> impl Stream<Item = ObjectRef<DynamicObject>> + Send {
        futures::stream::unfold(self, |pacer| async move {
            loop {
                if let Some(key) = pacer.admit() {
                    return Some((key, pacer));
                }
                // Woken by a push, or looked at again once the queue may
                // have drained.
                let _ = tokio::time::timeout(RECHECK, pacer.wake.notified()).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use kube::core::ApiResource;

    fn key(name: &str) -> ObjectRef<DynamicObject> {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        ObjectRef::new_with(name, ar).within("ns")
    }

    #[tokio::test]
    async fn keys_enter_in_order_once_each_while_the_queue_has_room() {
        let queue = Arc::new(QueueTracker::new("g"));
        let metrics = crate::telemetry::metrics::Metrics::default();
        let pacer = Arc::new(Pacer::new(queue.clone(), 2));
        for name in ["a", "b", "a", "c"] {
            queue.add(&metrics, format!("ns/{name}"), Duration::ZERO);
            pacer.push(key(name));
        }
        assert_eq!(pacer.len(), 3);
        let mut admitted = pacer.clone().admitted().boxed();
        assert_eq!(admitted.next().await.unwrap().name, "a");
        assert_eq!(admitted.next().await.unwrap().name, "b");
        // Two due in the queue: c waits until one starts.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), admitted.next())
                .await
                .is_err()
        );
        queue.start(&metrics, "ns/a", 1);
        assert_eq!(admitted.next().await.unwrap().name, "c");
        assert!(pacer.is_empty());
    }
}
