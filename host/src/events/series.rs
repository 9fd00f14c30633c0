//! Writing Events and folding repeats into series, as events.k8s.io/v1
//! and client-go's event broadcaster do: the first occurrence creates an
//! Event; the first repeat (same object, type, reason and action) within
//! [`SERIES_TTL`] of the last occurrence patches that Event's `series`
//! (`count`, `lastObservedTime`); later repeats are counted here and
//! written when the series ends ([`SERIES_TTL`] after its last occurrence),
//! every [`SERIES_REFRESH`] while it goes on, and when the writer closes.
//! A reconcile that fails the same way on every attempt so costs its
//! parent two Event writes, not one per attempt. `note` is immutable once
//! written, so a series keeps its first note.
//!
//! Each writer task owns one [`Series`]: what it remembers of an Event is
//! its name and counts, and forgetting what expired costs a look at the
//! oldest entries only, so its memory and work grow with the Events of the
//! last [`SERIES_TTL`], by a name and two counts each
//! (docs/decisions/0026-a-reconcile-waits-for-its-writes-not-its-events.md).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType};
use serde_json::json;
use wasmop_contract::names::REPORTER;

use super::Key;

/// How long after its last occurrence a repeat still joins an Event's
/// series (kube's `Recorder` and client-go: 6 minutes).
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// How often the counts of live series are written (client-go: 30
/// minutes).
pub const SERIES_REFRESH: Duration = Duration::from_secs(30 * 60);

/// The Events one writer has written, by key.
pub(super) struct Series {
    client: Client,
    /// `reportingInstance`: the guest's name.
    instance: String,
    written: HashMap<Key, Written>,
    /// Keys by the time of their last write, oldest first; a key written
    /// again appears again, and only its newest entry expires it.
    expiry: VecDeque<(Instant, Key)>,
    /// When the counts of live series were last written.
    refreshed: Instant,
}

/// What a repeat needs to patch the Event it joins (in the namespace of the
/// object the key names).
#[derive(Debug)]
struct Written {
    name: String,
    /// Occurrences seen.
    count: i32,
    /// Occurrences the Event on the API server shows.
    written: i32,
    last: Instant,
    last_observed: Timestamp,
    /// The regarded object's namespace, where the Event is.
    namespace: String,
}

impl Series {
    pub(super) fn new(client: Client, instance: String) -> Self {
        Self {
            client,
            instance,
            written: HashMap::new(),
            expiry: VecDeque::new(),
            refreshed: Instant::now(),
        }
    }

    /// Writes `event` on `regarding`: a new Event, the series of the
    /// Event `key` names, or a count kept for the next write of that
    /// series.
    pub(super) async fn record(
        &mut self,
        key: Key,
        regarding: &ObjectReference,
        event: &KubeEvent,
    ) -> kube::Result<()> {
        let now = Instant::now();
        self.maintain(now).await;
        if let Some(written) = self.written.get_mut(&key) {
            written.count += 1;
            written.last = now;
            written.last_observed = Timestamp::now();
            self.expiry.push_back((now, key.clone()));
            if written.written > 1 {
                return Ok(());
            }
            match self.write_count(&key).await {
                Ok(()) => return Ok(()),
                // Gone (the API server's Event TTL, or deleted): start over.
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    self.written.remove(&key);
                }
                Err(e) => return Err(e),
            }
        }
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        let created = api
            .create(&PostParams::default(), &self.new_event(regarding, event))
            .await?;
        let name = created.metadata.name.unwrap_or_default();
        self.written.insert(
            key.clone(),
            Written {
                name,
                count: 1,
                written: 1,
                last: now,
                last_observed: Timestamp::now(),
                namespace: namespace.to_owned(),
            },
        );
        self.expiry.push_back((now, key));
        Ok(())
    }

    /// Patches the series of the Event `key` names to the count seen.
    async fn write_count(&mut self, key: &Key) -> kube::Result<()> {
        let Some(written) = self.written.get_mut(key) else {
            return Ok(());
        };
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &written.namespace);
        let patch = json!({"series": EventSeries {
            count: written.count,
            last_observed_time: MicroTime(written.last_observed),
        }});
        api.patch(
            &written.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        written.written = written.count;
        Ok(())
    }

    /// Writes the counts not written yet of the series `keys` names; a
    /// failure is logged (the next occurrence or refresh tries again).
    async fn write_counts(&mut self, keys: &[Key]) {
        for key in keys {
            if let Err(e) = self.write_count(key).await {
                tracing::warn!(reason = %key.reason, "could not record an event's series: {e}");
            }
        }
    }

    /// The keys whose count is ahead of their Event.
    fn unwritten(&self) -> Vec<Key> {
        self.written
            .iter()
            .filter(|(_, w)| w.count > w.written)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// When [`Self::maintain`] next has work: the end of the oldest series
    /// or the next refresh.
    pub(super) fn next_due(&self) -> Instant {
        let refresh = self.refreshed + SERIES_REFRESH;
        self.expiry
            .front()
            .map_or(refresh, |(at, _)| refresh.min(*at + SERIES_TTL))
    }

    /// Ends the series whose last occurrence is [`SERIES_TTL`] old (writing
    /// their last count) and, every [`SERIES_REFRESH`], writes the counts
    /// of the others.
    pub(super) async fn maintain(&mut self, now: Instant) {
        let ended = self.expire(now);
        self.write_counts(&ended).await;
        for key in ended {
            self.written.remove(&key);
        }
        if now.duration_since(self.refreshed) >= SERIES_REFRESH {
            self.refreshed = now;
            let live = self.unwritten();
            self.write_counts(&live).await;
        }
    }

    /// Writes every count not written yet: the writer closes.
    pub(super) async fn close(&mut self) {
        let unwritten = self.unwritten();
        self.write_counts(&unwritten).await;
    }

    /// Forgets the Events whose last occurrence is older than
    /// [`SERIES_TTL`], but returns those whose count is ahead of their
    /// Event, for [`Self::maintain`] to write and forget.
    fn expire(&mut self, now: Instant) -> Vec<Key> {
        let mut unwritten = Vec::new();
        while let Some((at, _)) = self.expiry.front() {
            if now.duration_since(*at) < SERIES_TTL {
                break;
            }
            let (at, key) = self.expiry.pop_front().expect("a front entry");
            match self.written.get(&key) {
                Some(w) if w.last == at && w.count > w.written => unwritten.push(key),
                Some(w) if w.last == at => {
                    self.written.remove(&key);
                }
                _ => {}
            }
        }
        unwritten
    }

    /// How many Events this writer remembers.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.written.len()
    }

    fn new_event(&self, regarding: &ObjectReference, event: &KubeEvent) -> K8sEvent {
        let now = Timestamp::now();
        K8sEvent {
            metadata: ObjectMeta {
                // Named as kube's `Recorder` and client-go name them: the
                // object's name and the time in hexadecimal nanoseconds.
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or(REPORTER),
                    now.as_nanosecond()
                )),
                namespace: regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: event.note.clone(),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(REPORTER.to_owned()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(
                match event.type_ {
                    KubeEventType::Normal => "Normal",
                    KubeEventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            ..K8sEvent::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(object: &str) -> Key {
        Key {
            object: object.into(),
            warning: false,
            reason: "Tested".into(),
            action: "Test".into(),
        }
    }

    fn remember(series: &mut Series, object: &str, at: Instant) {
        let written = series.written.entry(key(object)).or_insert(Written {
            name: format!("{object}.1"),
            count: 0,
            written: 0,
            last: at,
            last_observed: Timestamp::now(),
            namespace: "default".into(),
        });
        written.count += 1;
        written.written = written.count;
        written.last = at;
        series.expiry.push_back((at, key(object)));
    }

    #[tokio::test]
    async fn a_series_is_forgotten_its_ttl_after_its_last_write() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let mut series = Series::new(Client::try_from(config).unwrap(), "g".into());
        let start = Instant::now();
        let minute = Duration::from_secs(60);
        remember(&mut series, "a", start);
        remember(&mut series, "b", start + minute);
        remember(&mut series, "a", start + 2 * minute);
        // a's first write is past the TTL, its last is not.
        assert!(series.expire(start + SERIES_TTL).is_empty());
        assert_eq!(series.len(), 2);
        assert_eq!(series.written[&key("a")].count, 2);
        series.expire(start + minute + SERIES_TTL);
        assert_eq!(series.len(), 1);
        assert!(series.written.contains_key(&key("a")));
        series.expire(start + 2 * minute + SERIES_TTL);
        assert_eq!(series.len(), 0);
        assert!(series.expiry.is_empty());
    }

    #[tokio::test]
    async fn a_series_that_ends_ahead_of_its_event_is_handed_back_to_be_written() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let mut series = Series::new(Client::try_from(config).unwrap(), "g".into());
        let start = Instant::now();
        remember(&mut series, "a", start);
        remember(&mut series, "b", start);
        // A third occurrence of a, counted but not written.
        series.written.get_mut(&key("a")).unwrap().count += 1;
        assert_eq!(series.unwritten(), [key("a")]);
        assert_eq!(series.next_due(), start + SERIES_TTL);
        assert_eq!(series.expire(start + SERIES_TTL), [key("a")]);
        // b is forgotten; a waits for its last write.
        assert_eq!(series.len(), 1);
    }
}
