//! The work-queue view of one guest's controller, for controller-runtime's
//! `workqueue_*` metrics.
//!
//! kube-runtime's controller keeps its queue to itself, so the host tracks
//! what a queue would report from the outside: a key is *queued* from the
//! first trigger that reaches it (a parent or child event, a resync, a
//! retry or a requested requeue, at the time it is due) until its reconcile
//! starts; it is *running* until the reconcile ends. Triggers for a key
//! already queued are deduplicated, as client-go's queue does (they do not
//! count as adds).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

/// `name`, `controller` (both the guest's name, as controller-runtime sets
/// them).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue's name.
    pub name: String,
    /// The guest's name.
    pub controller: String,
}

/// The `workqueue_*` families a queue counts in (shared with the host's
/// registry: a family's clone is the same family).
#[derive(Clone, Debug)]
pub struct QueueFamilies {
    /// `workqueue_adds_total`.
    pub adds: Family<QueueLabels, Counter>,
    /// `workqueue_queue_duration_seconds`.
    pub queue_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    /// `workqueue_work_duration_seconds`.
    pub work_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
}

/// One guest's queue, as seen from its triggers and reconciles.
#[derive(Debug)]
pub struct QueueTracker {
    labels: QueueLabels,
    families: QueueFamilies,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Key → when it became due.
    queued: HashMap<String, Instant>,
    /// Reconcile id → when it started.
    running: HashMap<u64, Instant>,
}

impl QueueTracker {
    /// The queue of guest `guest`, counted in `families`.
    pub fn new(guest: &str, families: QueueFamilies) -> Self {
        Self {
            families,
            labels: QueueLabels {
                name: guest.to_owned(),
                controller: guest.to_owned(),
            },
            state: Mutex::default(),
        }
    }

    /// A trigger reached `key`, due `after` from now.
    pub fn add(&self, key: String, after: Duration) {
        let due = Instant::now() + after;
        let mut state = self.state.lock().expect("queue lock");
        let fresh = match state.queued.get_mut(&key) {
            Some(when) => {
                *when = (*when).min(due);
                false
            }
            None => {
                state.queued.insert(key, due);
                true
            }
        };
        if fresh {
            self.families.adds.get_or_create(&self.labels).inc();
        }
    }

    /// The reconcile `id` of `key` starts: the key leaves the queue.
    /// Returns how long it waited there since it was due.
    pub fn start(&self, key: &str, id: u64) -> Duration {
        let now = Instant::now();
        let mut state = self.state.lock().expect("queue lock");
        let waited = state
            .queued
            .remove(key)
            .map_or(Duration::ZERO, |due| now.saturating_duration_since(due));
        state.running.insert(id, now);
        self.families
            .queue_duration
            .get_or_create(&self.labels)
            .observe(waited.as_secs_f64());
        waited
    }

    /// `key` will not be reconciled after all (its parent is gone, or this
    /// host does not lead): it leaves the queue without a reconcile.
    pub fn forget(&self, key: &str) {
        self.state.lock().expect("queue lock").queued.remove(key);
    }

    /// Forgets every queued key `live` says has no parent any more.
    pub fn retain(&self, mut live: impl FnMut(&str) -> bool) {
        self.state
            .lock()
            .expect("queue lock")
            .queued
            .retain(|key, _| live(key));
    }

    /// The reconcile `id` ended.
    pub fn finish(&self, id: u64) {
        let started = self.state.lock().expect("queue lock").running.remove(&id);
        if let Some(started) = started {
            self.families
                .work_duration
                .get_or_create(&self.labels)
                .observe(started.elapsed().as_secs_f64());
        }
    }

    /// Keys due and waiting for a worker (a requeue not yet due does not
    /// count, as in client-go's delaying queue).
    pub fn depth(&self) -> usize {
        let now = Instant::now();
        let state = self.state.lock().expect("queue lock");
        state.queued.values().filter(|due| **due <= now).count()
    }

    /// Seconds of work in progress (summed over running reconciles) and the
    /// longest running one.
    pub fn unfinished(&self) -> (f64, f64) {
        let state = self.state.lock().expect("queue lock");
        let now = Instant::now();
        state
            .running
            .values()
            .fold((0.0, 0.0_f64), |(sum, max), started| {
                let secs = now.duration_since(*started).as_secs_f64();
                (sum + secs, max.max(secs))
            })
    }

    /// The labels of this queue.
    pub fn labels(&self) -> &QueueLabels {
        &self.labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_queued_once_until_its_reconcile_starts() {
        let metrics = crate::telemetry::Metrics::default();
        let queue = metrics.queue("g");
        queue.add("ns/a".into(), Duration::ZERO);
        queue.add("ns/a".into(), Duration::ZERO);
        queue.add("ns/b".into(), Duration::from_secs(60));
        assert_eq!(metrics.queue_adds.get_or_create(queue.labels()).get(), 2);
        assert_eq!(
            queue.depth(),
            1,
            "a requeue not yet due is not in the queue"
        );
        let _ = queue.start("ns/a", 1);
        assert_eq!(queue.depth(), 0);
        assert!(queue.unfinished().0 >= 0.0);
        queue.finish(1);
        assert_eq!(queue.unfinished(), (0.0, 0.0));
    }
}
