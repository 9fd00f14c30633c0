//! Background work waits its turn; a user's change does not.
//!
//! kube-runtime's queue has no priorities, and of the keys due at once it
//! runs the newest first (tokio's `DelayQueue` keeps due keys on a stack):
//! when a thousand new parents are converging, or a resync or the initial
//! list queues every parent, a change a user makes to one existing parent
//! runs after all of them, or after every key queued behind it
//! (docs/decisions/0015-background-work-waits-its-turn.md). So the host
//! hands the queue only a few background keys at a time, and none while a
//! user's change waits there.
//! Background work is: parents seen for the first time (created, or listed
//! at start), versions of a parent the host wrote itself (its finalizer),
//! their children's changes, resyncs and the requeue of every parent (swap,
//! leadership, the API server back). Any other change of a parent the host
//! already knew (a user's) goes to the queue at once and holds the
//! background keys back until its reconcile starts; changes of related
//! objects go at once too. Background keys wait here, deduplicated, in
//! arrival order, and enter the queue while fewer than `limit` of those
//! already handed over have not started; the queue is never left idle
//! while only background work waits. A key handed over, or a user's change,
//! that does not start within [`HANDED_OVER_FOR`] (its parent went, or the
//! queue is busy with other users' changes) stops counting, so no miscount
//! can hold the pacer shut.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::compact::ParentRef;
use futures::Stream;

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
    order: VecDeque<ParentRef>,
    keys: HashSet<ParentRef>,
    /// Keys handed to the queue whose reconcile has not started, and when.
    handed_over: HashMap<ParentRef, Instant>,
    /// Users' changes in the queue whose reconcile has not started, and
    /// when they entered it.
    urgent: HashMap<ParentRef, Instant>,
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
    pub fn push(&self, key: ParentRef) {
        let mut waiting = self.waiting.lock().expect("pacer lock");
        if waiting.keys.insert(key.clone()) {
            waiting.order.push_back(key);
        }
        drop(waiting);
        self.wake.notify_one();
    }

    /// Records that a change a user made to `key` went to the queue at
    /// once: no background key enters the queue until it started.
    pub fn urgent(&self, key: ParentRef) {
        let mut waiting = self.waiting.lock().expect("pacer lock");
        waiting.urgent.insert(key, Instant::now());
    }

    /// Records that the reconcile of `key` started (from any trigger).
    pub fn started(&self, key: &ParentRef) {
        let mut waiting = self.waiting.lock().expect("pacer lock");
        let handed_over = waiting.handed_over.remove(key).is_some();
        let urgent = waiting.urgent.remove(key).is_some();
        drop(waiting);
        if handed_over || urgent {
            self.wake.notify_one();
        }
    }

    /// The next key, if the queue has room for it.
    fn admit(&self) -> Option<ParentRef> {
        let now = Instant::now();
        let mut waiting = self.waiting.lock().expect("pacer lock");
        let fresh = |_: &ParentRef, at: &mut Instant| now.duration_since(*at) < HANDED_OVER_FOR;
        waiting.handed_over.retain(fresh);
        waiting.urgent.retain(fresh);
        if waiting.handed_over.len() >= self.limit || !waiting.urgent.is_empty() {
            return None;
        }
        let key = waiting.order.pop_front()?;
        waiting.keys.remove(&key);
        waiting.handed_over.insert(key.clone(), now);
        Some(key)
    }

    /// The keys as the queue has room for them, for `reconcile_on`.
    pub fn admitted(self: Arc<Self>) -> impl Stream<Item = ParentRef> + Send {
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
    use kube::runtime::reflector::ObjectRef;

    impl Pacer {
        fn waiting(&self) -> usize {
            self.waiting.lock().expect("pacer lock").order.len()
        }
    }

    fn key(name: &str) -> ParentRef {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        ObjectRef::new_with(name, ar).within("ns")
    }

    /// Whether the pacer admits nothing for 50 ms.
    async fn held(admitted: &mut (impl Stream<Item = ParentRef> + Unpin)) -> bool {
        tokio::time::timeout(Duration::from_millis(50), admitted.next())
            .await
            .is_err()
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
        assert!(held(&mut admitted).await);
        pacer.started(&key("a"));
        assert_eq!(admitted.next().await.unwrap().name, "c");
        assert_eq!(pacer.waiting(), 0);
    }

    #[tokio::test]
    async fn a_users_change_waiting_in_the_queue_holds_background_keys_back() {
        let pacer = Arc::new(Pacer::new(4));
        pacer.push(key("a"));
        pacer.push(key("b"));
        let mut admitted = pacer.clone().admitted().boxed();
        assert_eq!(admitted.next().await.unwrap().name, "a");
        // kube-runtime's queue runs keys due at once newest first: a key
        // handed over after the user's would run before it.
        pacer.urgent(key("user"));
        assert!(held(&mut admitted).await);
        pacer.started(&key("user"));
        assert_eq!(admitted.next().await.unwrap().name, "b");
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
