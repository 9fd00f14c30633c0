//! Writing Events and folding repeats into series, as events.k8s.io/v1
//! intends: the first occurrence creates an Event; a repeat (same object,
//! type, reason and action) within [`SERIES_TTL`] of the last one patches
//! that Event's `series` (`count`, `lastObservedTime`) instead of creating
//! another, as client-go's event broadcaster does. `note` is immutable
//! once written, so a series keeps its first note.
//!
//! Each writer task owns one [`Series`]: what it remembers of an Event is
//! its name and count, and forgetting what expired costs a look at the
//! oldest entries only, so its memory and work grow with the Events of the
//! last [`SERIES_TTL`], by a name and a count each
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

/// The Events one writer has written, by key.
pub(super) struct Series {
    client: Client,
    /// `reportingInstance`: the guest's name.
    instance: String,
    written: HashMap<Key, Written>,
    /// Keys by the time of their last write, oldest first; a key written
    /// again appears again, and only its newest entry expires it.
    expiry: VecDeque<(Instant, Key)>,
}

/// What a repeat needs to patch the Event it joins (in the namespace of the
/// object the key names).
#[derive(Debug)]
struct Written {
    name: String,
    count: i32,
    last: Instant,
}

impl Series {
    pub(super) fn new(client: Client, instance: String) -> Self {
        Self {
            client,
            instance,
            written: HashMap::new(),
            expiry: VecDeque::new(),
        }
    }

    /// Writes `event` on `regarding`: a new Event, or the next count of
    /// the series `key` names.
    pub(super) async fn record(
        &mut self,
        key: Key,
        regarding: &ObjectReference,
        event: &KubeEvent,
    ) -> kube::Result<()> {
        let now = Instant::now();
        self.expire(now);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        if let Some(written) = self.written.get_mut(&key) {
            let count = written.count + 1;
            let patch = json!({"series": EventSeries {
                count,
                last_observed_time: MicroTime(Timestamp::now()),
            }});
            match api
                .patch(
                    &written.name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {
                    written.count = count;
                    written.last = now;
                    self.expiry.push_back((now, key));
                    return Ok(());
                }
                // Gone (the API server's Event TTL, or deleted): start over.
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    self.written.remove(&key);
                }
                Err(e) => return Err(e),
            }
        }
        let created = api
            .create(&PostParams::default(), &self.new_event(regarding, event))
            .await?;
        let name = created.metadata.name.unwrap_or_default();
        self.written.insert(
            key.clone(),
            Written {
                name,
                count: 1,
                last: now,
            },
        );
        self.expiry.push_back((now, key));
        Ok(())
    }

    /// Forgets the Events whose last write is older than [`SERIES_TTL`].
    pub(super) fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.expiry.front() {
            if now.duration_since(*at) < SERIES_TTL {
                break;
            }
            let (at, key) = self.expiry.pop_front().expect("a front entry");
            if self.written.get(&key).is_some_and(|w| w.last == at) {
                self.written.remove(&key);
            }
        }
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
            last: at,
        });
        written.count += 1;
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
        series.expire(start + SERIES_TTL);
        assert_eq!(series.len(), 2);
        assert_eq!(series.written[&key("a")].count, 2);
        series.expire(start + minute + SERIES_TTL);
        assert_eq!(series.len(), 1);
        assert!(series.written.contains_key(&key("a")));
        series.expire(start + 2 * minute + SERIES_TTL);
        assert_eq!(series.len(), 0);
        assert!(series.expiry.is_empty());
    }
}
