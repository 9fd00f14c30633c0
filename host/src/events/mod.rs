//! Events on the parent: what the guest asked for and what the host saw go
//! wrong, as events.k8s.io/v1 Events (`kubectl describe` shows them).
//!
//! Recording an Event never holds up a reconcile: [`Events::publish`] puts
//! it in a queue and returns, and a few tasks per guest write the queue out
//! (an object's Events always go through the same task, so they are written
//! in the order they were published). While an Event waits, a repeat of it
//! (same object, type, reason and action) takes its place with its own note
//! instead of queueing a second write: under load the API server gets one
//! write for a burst of repeats, its note the newest.
//!
//! Three things keep a guest from flooding the API server with Events, as
//! client-go's recorder does: a repeat of a written Event joins it as a
//! growing `series.count` instead of a new object ([`series`]), a
//! per-object token bucket ([`SPAM_BURST`] Events, then one per
//! [`SPAM_REFILL`]) drops what exceeds it, and a writer's queue holds at
//! most [`MAX_WAITING`] Events (client-go's broadcaster drops beyond 1000
//! too). Each answer is bounded as well (`maxEvents`, checked in
//! `validate`).

mod series;

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType};
use tokio::sync::Notify;
use wasmop_contract::Reason;

use crate::leader::Leadership;
use crate::model::{Event, EventType};
use series::Series;

/// Events one object may get at once (client-go's spam filter: 25).
pub const SPAM_BURST: u32 = 25;
/// Time to earn one more Event (client-go's spam filter: one per 5 min).
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Objects whose buckets are kept; beyond this, full buckets are dropped
/// first (client-go keeps 4096 too).
const MAX_BUCKETS: usize = 4096;
/// Tasks writing one guest's Events.
const WRITERS: usize = 2;
/// Events one writer's queue holds; a new one beyond it is dropped.
pub const MAX_WAITING: usize = 1000;

/// Publishes events for one guest.
pub struct Events {
    client: Client,
    /// The guest's name: the Events' `reportingInstance`.
    instance: String,
    /// Started with the first Event.
    writers: OnceLock<Vec<Arc<Waiting>>>,
    /// Ends when every writer has stopped (each holds a sender).
    stopped: Mutex<Option<tokio::sync::mpsc::Receiver<()>>>,
    spam: SpamFilter,
    leadership: Option<Leadership>,
}

/// What makes two Events repeats of each other (a written one and its
/// repeats are one Event with a series).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    object: String,
    warning: bool,
    reason: String,
    action: String,
}

/// One writer's queue: Events in the order they were published, a repeat
/// folded into the one that waits.
#[derive(Default)]
struct Waiting {
    queue: Mutex<Queue>,
    wake: Notify,
}

#[derive(Default)]
struct Queue {
    order: VecDeque<Key>,
    events: HashMap<Key, (ObjectReference, KubeEvent)>,
    closed: bool,
}

/// What [`Queue::push`] did with an Event.
#[derive(Debug, PartialEq, Eq)]
enum Pushed {
    Queued,
    Folded,
    Dropped,
}

impl Queue {
    fn push(&mut self, key: Key, reference: ObjectReference, event: KubeEvent) -> Pushed {
        if let Some(waiting) = self.events.get_mut(&key) {
            *waiting = (reference, event);
            return Pushed::Folded;
        }
        if self.order.len() >= MAX_WAITING {
            return Pushed::Dropped;
        }
        self.order.push_back(key.clone());
        self.events.insert(key, (reference, event));
        Pushed::Queued
    }

    fn pop(&mut self) -> Option<(Key, ObjectReference, KubeEvent)> {
        let key = self.order.pop_front()?;
        let (reference, event) = self.events.remove(&key)?;
        Some((key, reference, event))
    }
}

impl Waiting {
    /// The next Event to write, waiting for one; `None` once the
    /// publisher is gone and the queue is empty.
    async fn next(&self) -> Option<(Key, ObjectReference, KubeEvent)> {
        loop {
            {
                let mut queue = self.queue.lock().expect("events queue lock");
                if let Some(next) = queue.pop() {
                    return Some(next);
                }
                if queue.closed {
                    return None;
                }
            }
            // `notify_one` keeps a permit when nobody waits, so a push
            // between the check above and this wait is not missed.
            self.wake.notified().await;
        }
    }
}

/// Writes one queue's Events until its publisher closes it, then the
/// series counts not written yet.
async fn write(waiting: Arc<Waiting>, mut series: Series, leadership: Option<Leadership>) {
    loop {
        // An idle writer ends and refreshes series too (`next` looks at the
        // queue before it waits, so nothing pushed meanwhile is missed).
        let due = tokio::time::Instant::from_std(series.next_due());
        let (key, reference, event) = match tokio::time::timeout_at(due, waiting.next()).await {
            Ok(Some(next)) => next,
            Ok(None) => {
                series.close().await;
                return;
            }
            Err(_) => {
                series.maintain(Instant::now()).await;
                continue;
            }
        };
        if leadership.as_ref().is_some_and(|l| !l.is_leader()) {
            continue;
        }
        if let Err(e) = series.record(key, &reference, &event).await {
            tracing::warn!(reason = %event.reason, "could not record event: {e}");
        }
    }
}

/// The spam filter: a token bucket per object ([`SPAM_BURST`] Events, then
/// one per [`SPAM_REFILL`], the time earned towards the next one kept).
type SpamFilter<C = governor::clock::DefaultClock> = governor::RateLimiter<
    String,
    governor::state::keyed::HashMapStateStore<String>,
    C,
    governor::middleware::NoOpMiddleware<<C as governor::clock::Clock>::Instant>,
>;

/// A spam filter timed by `clock`.
fn spam_filter<C: governor::clock::Clock>(clock: C) -> SpamFilter<C> {
    let quota = governor::Quota::with_period(SPAM_REFILL)
        .expect("a refill period above zero")
        .allow_burst(std::num::NonZeroU32::new(SPAM_BURST).expect("a burst above zero"));
    governor::RateLimiter::hashmap_with_clock(quota, clock)
}

/// Whether `filter` lets one more Event on `object` through now. Past
/// [`MAX_BUCKETS`] objects, the buckets that are full again go first.
fn allow<C: governor::clock::Clock>(filter: &SpamFilter<C>, object: &str) -> bool {
    if filter.len() >= MAX_BUCKETS {
        filter.retain_recent();
    }
    filter.check_key(&object.to_owned()).is_ok()
}

impl Events {
    /// A recorder reporting as `wasmop`, instance `<guest>`.
    pub fn new(client: Client, guest: &str) -> Self {
        Self {
            client,
            instance: guest.to_owned(),
            writers: OnceLock::new(),
            stopped: Mutex::default(),
            spam: spam_filter(governor::clock::DefaultClock::default()),
            leadership: None,
        }
    }

    /// Records nothing while this host is not the leader (a standby's
    /// client would refuse the write anyway; this keeps its log quiet).
    #[must_use]
    pub fn fenced_by(mut self, leadership: Leadership) -> Self {
        self.leadership = Some(leadership);
        self
    }

    /// The queue of the writer that writes `object`'s Events.
    fn writer_of(&self, object: &str) -> &Waiting {
        let writers = self.writers.get_or_init(|| {
            let (running, stopped) = tokio::sync::mpsc::channel(1);
            *self.stopped.lock().expect("events lock") = Some(stopped);
            (0..WRITERS)
                .map(|_| {
                    let waiting = Arc::new(Waiting::default());
                    let running = running.clone();
                    let series = Series::new(self.client.clone(), self.instance.clone());
                    let leadership = self.leadership.clone();
                    let queue = waiting.clone();
                    tokio::spawn(async move {
                        write(queue, series, leadership).await;
                        drop(running);
                    });
                    waiting
                })
                .collect()
        });
        let mut hasher = DefaultHasher::new();
        object.hash(&mut hasher);
        let shard = usize::try_from(hasher.finish() % WRITERS as u64).unwrap_or(0);
        &writers[shard]
    }

    /// Records `event` on `object` without waiting for the write. Failing
    /// to record an event is logged, never fatal: the reconcile's real work
    /// matters more.
    pub fn publish(&self, object: &ObjectReference, event: &Event, action: &str) {
        if self.leadership.as_ref().is_some_and(|l| !l.is_leader()) {
            return;
        }
        let key = object
            .uid
            .clone()
            .unwrap_or_else(|| format!("{:?}/{:?}", object.namespace, object.name));
        if !allow(&self.spam, &key) {
            tracing::debug!(reason = %event.reason, "event dropped: the object had {SPAM_BURST} events recently");
            return;
        }
        let warning = matches!(event.event_type, EventType::Warning);
        let ev = KubeEvent {
            type_: if warning {
                KubeEventType::Warning
            } else {
                KubeEventType::Normal
            },
            reason: event.reason.clone(),
            // The API server refuses a longer note, and the Event is lost.
            note: Some(
                crate::sink::cut(&event.message, crate::sink::EVENT_NOTE_BYTES).into_owned(),
            ),
            action: action.to_string(),
            secondary: None,
        };
        let writer = self.writer_of(&key);
        let key = Key {
            object: key,
            warning,
            reason: event.reason.clone(),
            action: action.to_string(),
        };
        let pushed = writer
            .queue
            .lock()
            .expect("events queue lock")
            .push(key, object.clone(), ev);
        match pushed {
            Pushed::Queued => writer.wake.notify_one(),
            Pushed::Folded => {}
            Pushed::Dropped => {
                tracing::warn!(reason = %event.reason, "event dropped: {MAX_WAITING} events wait to be written");
            }
        }
    }

    /// Records a host-side Event with one of the host's reasons.
    pub fn host(
        &self,
        object: &ObjectReference,
        event_type: EventType,
        reason: Reason,
        message: String,
        action: &str,
    ) {
        let event = Event {
            event_type,
            reason: reason.as_str().to_owned(),
            message,
        };
        self.publish(object, &event, action);
    }

    /// Records a host-side Warning about a reconcile.
    pub fn warn(&self, object: &ObjectReference, reason: Reason, message: String) {
        self.host(object, EventType::Warning, reason, message, "Reconcile");
    }
}

impl Events {
    /// Tells the writers to write what waits and the series counts not
    /// written yet, then stop.
    fn close_queues(&self) {
        for waiting in self.writers.get().into_iter().flatten() {
            waiting.queue.lock().expect("events queue lock").closed = true;
            waiting.wake.notify_one();
        }
    }

    /// Writes what waits and the series counts not written yet; returns
    /// once the writers have stopped. Events published after it are not
    /// written.
    pub async fn close(&self) {
        self.close_queues();
        let stopped = self.stopped.lock().expect("events lock").take();
        if let Some(mut stopped) = stopped {
            while stopped.recv().await.is_some() {}
        }
    }
}

impl Drop for Events {
    /// The writers write what waits, then stop.
    fn drop(&mut self) {
        self.close_queues();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_gets_a_burst_then_one_event_per_refill_keeping_what_time_earned() {
        let clock = governor::clock::FakeRelativeClock::default();
        let filter = spam_filter(clock.clone());
        for _ in 0..SPAM_BURST {
            assert!(allow(&filter, "a"));
        }
        assert!(!allow(&filter, "a"));
        assert!(allow(&filter, "b"), "each object has its own bucket");
        clock.advance(SPAM_REFILL / 2);
        assert!(!allow(&filter, "a"));
        // The half refill earned before counts towards the next Event.
        clock.advance(SPAM_REFILL / 2);
        assert!(allow(&filter, "a"));
        assert!(!allow(&filter, "a"));
        clock.advance(SPAM_REFILL * (SPAM_BURST + 1));
        for _ in 0..SPAM_BURST {
            assert!(allow(&filter, "a"));
        }
        assert!(!allow(&filter, "a"));
    }

    #[test]
    fn past_the_bound_full_buckets_are_forgotten_first() {
        let clock = governor::clock::FakeRelativeClock::default();
        let filter = spam_filter(clock.clone());
        assert!(allow(&filter, "busy"));
        for n in 0..MAX_BUCKETS {
            assert!(allow(&filter, &format!("quiet-{n}")));
        }
        clock.advance(SPAM_REFILL * 2);
        assert!(allow(&filter, "one more"));
        assert!(filter.len() < MAX_BUCKETS, "{} buckets kept", filter.len());
    }

    fn key(object: &str, reason: &str) -> Key {
        Key {
            object: object.into(),
            warning: false,
            reason: reason.into(),
            action: "Reconcile".into(),
        }
    }

    fn event(reason: &str, note: &str) -> KubeEvent {
        KubeEvent {
            type_: KubeEventType::Normal,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Reconcile".into(),
            secondary: None,
        }
    }

    fn note(next: Option<(Key, ObjectReference, KubeEvent)>) -> Option<String> {
        next.and_then(|(_, _, e)| e.note)
    }

    #[test]
    fn a_repeat_that_waits_takes_the_place_of_the_first_with_its_note() {
        let mut queue = Queue::default();
        let r = ObjectReference::default;
        let pushes = [
            ("a", "PhaseChanged", "phase is Pending"),
            ("a", "Created", "creating"),
            ("b", "PhaseChanged", "phase is Pending"),
            ("a", "PhaseChanged", "phase changed from Pending to Ready"),
        ];
        let pushed: Vec<Pushed> = pushes
            .iter()
            .map(|(o, reason, n)| queue.push(key(o, reason), r(), event(reason, n)))
            .collect();
        assert_eq!(
            pushed,
            [
                Pushed::Queued,
                Pushed::Queued,
                Pushed::Queued,
                Pushed::Folded
            ]
        );
        let notes: Vec<Option<String>> = std::iter::from_fn(|| queue.pop().map(Some))
            .map(note)
            .collect();
        assert_eq!(
            notes,
            [
                Some("phase changed from Pending to Ready".into()),
                Some("creating".into()),
                Some("phase is Pending".into()),
            ]
        );
        // Written, it is no longer waiting: the next repeat queues again.
        assert_eq!(
            queue.push(key("a", "PhaseChanged"), r(), event("PhaseChanged", "x")),
            Pushed::Queued
        );
    }

    #[test]
    fn a_full_queue_drops_new_events_but_still_folds_repeats() {
        let mut queue = Queue::default();
        for i in 0..MAX_WAITING {
            let object = i.to_string();
            assert_eq!(
                queue.push(
                    key(&object, "R"),
                    ObjectReference::default(),
                    event("R", "n")
                ),
                Pushed::Queued
            );
        }
        let extra = queue.push(key("x", "R"), ObjectReference::default(), event("R", "n"));
        assert_eq!(extra, Pushed::Dropped);
        let repeat = queue.push(key("0", "R"), ObjectReference::default(), event("R", "m"));
        assert_eq!(repeat, Pushed::Folded);
        assert_eq!(queue.order.len(), MAX_WAITING);
    }

    #[tokio::test]
    async fn a_closed_queue_is_written_out_before_its_writer_stops() {
        let waiting = Waiting::default();
        {
            let mut queue = waiting.queue.lock().unwrap();
            queue.push(key("a", "R"), ObjectReference::default(), event("R", "1"));
            queue.push(key("b", "R"), ObjectReference::default(), event("R", "2"));
            queue.closed = true;
        }
        assert_eq!(note(waiting.next().await).as_deref(), Some("1"));
        assert_eq!(note(waiting.next().await).as_deref(), Some("2"));
        assert!(waiting.next().await.is_none());
    }
}
