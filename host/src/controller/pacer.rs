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
//! arrival order, and enter the queue while fewer than `limit` of those
//! already handed over have not started; the queue is never left idle while
//! work waits here. A key handed over that does not start within
//! [`HANDED_OVER_FOR`] (its parent went, or the queue is busy with users'
//! changes) stops counting, so no miscount can hold the pacer shut.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::Stream;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;

/// How often a full queue is looked at again.
const RECHECK: Duration = Duration::from_millis(5);

/// How long a key handed to the queue counts as waiting there.
pub const HANDED_OVER_FOR: Duration = Duration::from_secs(2);

/// The background keys of one controller scope.
pub struct Pacer {
    waiting: Mutex<Waiting>,
    wake: tokio::sync::Notify,
    limit: usize,
}

#[derive(Default)]
struct Waiting {
    order: VecDeque<ObjectRef<DynamicObject>>,
    keys: HashSet<ObjectRef<DynamicObject>>,
    /// Keys handed to the queue whose reconcile has not started, and when.
    handed_over: HashMap<ObjectRef<DynamicObject>, Instant>,
}

impl Pacer {
    /// Background keys enter the queue while fewer than `limit` handed
    /// over have not started.
    pub fn new(limit: usize) -> Self {
        Self {
            waiting: Mutex::default(),
            wake: tokio::sync::Notify::new(),
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

    /// Records that the reconcile of `key` started (from any trigger).
    pub fn started(&self, key: &ObjectRef<DynamicObject>) {
        let removed = self
            .waiting
            .lock()
            .expect("pacer lock")
            .handed_over
            .remove(key);
        if removed.is_some() {
            self.wake.notify_one();
        }
    }

    /// The next key, if the queue has room for it.
    fn admit(&self) -> Option<ObjectRef<DynamicObject>> {
        let now = Instant::now();
        let mut waiting = self.waiting.lock().expect("pacer lock");
        waiting
            .handed_over
            .retain(|_, at| now.duration_since(*at) < HANDED_OVER_FOR);
        if waiting.handed_over.len() >= self.limit {
            return None;
        }
        let key = waiting.order.pop_front()?;
        waiting.keys.remove(&key);
        waiting.handed_over.insert(key.clone(), now);
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

    impl Pacer {
        fn waiting(&self) -> usize {
            self.waiting.lock().expect("pacer lock").order.len()
        }
    }

    fn key(name: &str) -> ObjectRef<DynamicObject> {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        ObjectRef::new_with(name, ar).within("ns")
    }

    #[tokio::test]
    async fn keys_enter_in_order_once_each_while_the_queue_has_room() {
        let pacer = Arc::new(Pacer::new(2));
        for name in ["a", "b", "a", "c"] {
            pacer.push(key(name));
        }
        assert_eq!(pacer.waiting(), 3);
        let mut admitted = pacer.clone().admitted().boxed();
        assert_eq!(admitted.next().await.unwrap().name, "a");
        assert_eq!(admitted.next().await.unwrap().name, "b");
        // Two handed over and not started: c waits until one starts.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), admitted.next())
                .await
                .is_err()
        );
        pacer.started(&key("a"));
        assert_eq!(admitted.next().await.unwrap().name, "c");
        assert_eq!(pacer.waiting(), 0);
    }

    #[tokio::test]
    async fn a_key_that_never_starts_stops_holding_the_pacer_shut() {
        let pacer = Arc::new(Pacer::new(1));
        pacer.push(key("gone"));
        pacer.push(key("next"));
        let mut admitted = pacer.clone().admitted().boxed();
        assert_eq!(admitted.next().await.unwrap().name, "gone");
        // "gone" never starts (its parent was deleted); "next" still comes,
        // once "gone" stops counting.
        assert_eq!(admitted.next().await.unwrap().name, "next");
    }
}
