//! Events on the parent: what the guest asked for and what the host saw go
//! wrong, as events.k8s.io/v1 Events (`kubectl describe` shows them).
//!
//! Two things keep a guest from flooding the API server with Events, as
//! client-go's recorder does: kube's [`Recorder`] folds a repeat of the same
//! Event into one object with a growing `series.count`, and a per-object
//! token bucket ([`SPAM_BURST`] Events, then one per [`SPAM_REFILL`]) drops
//! what exceeds it. Each answer is bounded too (`maxEvents`, checked in
//! `validate`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use wasmop_contract::Reason;
use wasmop_contract::names::REPORTER;

use crate::leader::Leadership;
use crate::model::{Event, EventType};

/// Events one object may get at once (client-go's spam filter: 25).
pub const SPAM_BURST: u32 = 25;
/// Time to earn one more Event (client-go's spam filter: one per 5 min).
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Objects whose buckets are kept; beyond this, full buckets are dropped
/// first (client-go keeps 4096 too).
const MAX_BUCKETS: usize = 4096;

/// Publishes events for one guest.
pub struct Events {
    recorder: Recorder,
    buckets: Mutex<HashMap<String, Bucket>>,
    leadership: Option<Leadership>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: u32,
    since: Instant,
}

impl Bucket {
    fn full(now: Instant) -> Self {
        Self {
            tokens: SPAM_BURST,
            since: now,
        }
    }

    /// Refills what time earned, then takes one token if there is one.
    fn take(&mut self, now: Instant) -> bool {
        let earned = now.duration_since(self.since).as_secs() / SPAM_REFILL.as_secs();
        if earned > 0 {
            self.tokens = SPAM_BURST.min(
                self.tokens
                    .saturating_add(u32::try_from(earned).unwrap_or(u32::MAX)),
            );
            self.since = now;
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }

    fn is_full(&self, now: Instant) -> bool {
        let mut copy = *self;
        copy.take(now);
        copy.tokens + 1 >= SPAM_BURST
    }
}

impl Events {
    /// A recorder reporting as `wasmop`, instance `<guest>`.
    pub fn new(client: Client, guest: &str) -> Self {
        let reporter = Reporter {
            controller: REPORTER.into(),
            instance: Some(guest.to_string()),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            buckets: Mutex::default(),
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

    /// Whether the object may get one more Event now.
    fn allow(&self, object: &ObjectReference) -> bool {
        let key = object
            .uid
            .clone()
            .unwrap_or_else(|| format!("{:?}/{:?}", object.namespace, object.name));
        let now = Instant::now();
        let mut buckets = self.buckets.lock().expect("events lock");
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(&key) {
            buckets.retain(|_, b| !b.is_full(now));
        }
        buckets
            .entry(key)
            .or_insert_with(|| Bucket::full(now))
            .take(now)
    }

    /// Records `event` on `object`. Failing to record an event is logged,
    /// never fatal: the reconcile's real work matters more.
    pub async fn publish(&self, object: &ObjectReference, event: &Event, action: &str) {
        if self.leadership.as_ref().is_some_and(|l| !l.is_leader()) {
            return;
        }
        if !self.allow(object) {
            tracing::debug!(reason = %event.reason, "event dropped: the object had {SPAM_BURST} events recently");
            return;
        }
        let ev = KubeEvent {
            type_: match event.event_type {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: event.reason.clone(),
            note: Some(event.message.clone()),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, object).await {
            tracing::warn!(reason = %event.reason, "could not record event: {e}");
        }
    }

    /// Records a host-side Event with one of the host's reasons.
    pub async fn host(
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
        self.publish(object, &event, action).await;
    }

    /// Records a host-side Warning about a reconcile.
    pub async fn warn(&self, object: &ObjectReference, reason: Reason, message: String) {
        self.host(object, EventType::Warning, reason, message, "Reconcile")
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_a_burst_then_one_event_per_refill() {
        let start = Instant::now();
        let mut bucket = Bucket::full(start);
        for _ in 0..SPAM_BURST {
            assert!(bucket.take(start));
        }
        assert!(!bucket.take(start));
        assert!(!bucket.take(start + SPAM_REFILL / 2));
        assert!(bucket.take(start + SPAM_REFILL));
        assert!(!bucket.take(start + SPAM_REFILL));
        assert!(bucket.is_full(start + SPAM_REFILL * (SPAM_BURST + 1)));
    }
}
