//! Where a rollout shows, and where it lives between hosts: the ConfigMap
//! `<list name>-status` beside the guest list (interface contract), one
//! data key per guest whose value is YAML:
//!
//! ```yaml
//! stable: 3f1c…          # sha256 of the stable module
//! candidate: 9ab2…       # sha256 of the candidate, while there is one
//! phase: Progressing     # Stable | Shadowing | Progressing | Promoted | Aborted
//! step: 1                # the Canary step (1-based), 0 otherwise
//! parentsOnCandidate: 2
//! failedReconciles: 0
//! reason: …              # why it aborted, or what it is doing
//! ```
//!
//! and, for a host that resumes the rollout: `strategy`, `weight` (percent
//! of parents on the candidate at this step), `cut` (the highest parent
//! position on the candidate, [`super::side`]) and `stableSource` (where
//! the stable module can be fetched again). Only the leader writes it
//! ([`Board`]); every replica reads it through the guest list's watch.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde::{Deserialize, Serialize};

use super::settings::Strategy;
use crate::events::Events;
use crate::leader::Leadership;
use crate::model::EventType;
use wasmop_contract::Reason;

/// The status ConfigMap's name for the guest list `list`.
pub fn status_name(list: &str) -> String {
    format!("{list}-status")
}

/// The field manager of the host's writes to the status ConfigMap.
const MANAGER: &str = "wasmop";

/// Where a guest's rollout stands (interface contract).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// One version serves every parent.
    #[default]
    Stable,
    /// The candidate answers beside the stable version, never applied.
    Shadowing,
    /// Parents are moving to the candidate step by step.
    Progressing,
    /// The candidate serves every parent: it is the stable version now.
    Promoted,
    /// A step failed: every parent is back on the stable version and the
    /// candidate is not tried again until the entry's module changes.
    Aborted,
}

impl Phase {
    /// Every phase, for the metrics.
    pub const ALL: [Phase; 5] = [
        Phase::Stable,
        Phase::Shadowing,
        Phase::Progressing,
        Phase::Promoted,
        Phase::Aborted,
    ];

    /// The phase as it is written.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stable => "Stable",
            Self::Shadowing => "Shadowing",
            Self::Progressing => "Progressing",
            Self::Promoted => "Promoted",
            Self::Aborted => "Aborted",
        }
    }
}

/// One guest's record in the status ConfigMap.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// sha256 of the stable module.
    pub stable: String,
    /// sha256 of the candidate module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<String>,
    /// The first 16 hex digits of the sha256 of the candidate's settings,
    /// when it has settings (a version is its module and its settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_settings: Option<String>,
    /// The phase.
    #[serde(default)]
    pub phase: Phase,
    /// The strategy the rollout runs under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// The Canary step, 1-based; 0 when none runs.
    #[serde(default)]
    pub step: u32,
    /// Percent of parents on the candidate at this step.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight: u8,
    /// Parents the candidate serves.
    #[serde(default)]
    pub parents_on_candidate: u64,
    /// Failed reconciles of the candidate in this step.
    #[serde(default)]
    pub failed_reconciles: u32,
    /// Why the rollout is where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The highest parent position on the candidate, as 16 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
    /// The stable version's settings (JSON text), while a candidate exists
    /// or was rolled back: a resuming host loads the stable version with
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_settings: Option<String>,
    /// Where the stable module can be fetched again (a guest list
    /// `module` value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_source: Option<serde_json::Value>,
}

/// What a version's settings are recorded as: the first 16 hex digits of
/// the sha256 of their JSON text; none without settings.
pub fn settings_hash(settings: Option<&str>) -> Option<String> {
    use sha2::Digest as _;
    settings.map(|text| hex::encode(&sha2::Sha256::digest(text.as_bytes())[..8]))
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

impl Record {
    /// The record of a guest that runs one version, `digest`.
    pub fn stable(digest: &str) -> Self {
        Self {
            stable: digest.to_owned(),
            ..Self::default()
        }
    }

    /// The cut as a number.
    pub fn cut(&self) -> Option<u64> {
        self.cut
            .as_deref()
            .and_then(|c| u64::from_str_radix(c, 16).ok())
    }

    /// Sets the cut.
    pub fn set_cut(&mut self, cut: Option<u64>) {
        self.cut = cut.map(|c| format!("{c:016x}"));
    }

    /// The record as it is written.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).expect("a record serialises")
    }
}

/// The records of a status ConfigMap; keys whose value does not parse are
/// left out (and logged).
pub fn records(cm: &ConfigMap) -> BTreeMap<String, Record> {
    cm.data
        .iter()
        .flatten()
        .filter_map(
            |(guest, text)| match serde_saphyr::from_str::<Record>(text) {
                Ok(record) => Some((guest.clone(), record)),
                Err(e) => {
                    tracing::warn!(guest, "unreadable rollout record, ignored: {e}");
                    None
                }
            },
        )
        .collect()
}

/// The host's records, written to the status ConfigMap by the leader:
/// only when they differ from what the cluster holds (so a restarted host
/// over an unchanged rollout writes nothing), at most one write at a time.
#[derive(Clone)]
pub struct Board {
    inner: Arc<Inner>,
}

struct Inner {
    api: Api<ConfigMap>,
    name: String,
    namespace: String,
    leadership: Leadership,
    desired: Mutex<BTreeMap<String, Record>>,
    /// Guests whose records go (removed from the list); the records of
    /// listed guests this host does not run stay as the cluster has them.
    removed: Mutex<std::collections::BTreeSet<String>>,
    /// What the cluster holds, once known (`None` before the first list).
    observed: Mutex<Option<BTreeMap<String, String>>>,
    wake: tokio::sync::Notify,
    client: Client,
    /// The guest list ConfigMap, which rollout Events are about.
    list: Mutex<Option<ObjectReference>>,
    /// One Event recorder per guest, so two guests' Events of one reason
    /// stay apart.
    events: Mutex<HashMap<String, Events>>,
    /// Who writes each guest's record and Events: the holder of the
    /// guest's unit of work (the host's leadership for the others).
    leaders: Mutex<HashMap<String, Leadership>>,
}

impl Board {
    /// The board of the guest list `namespace/list`; its writer runs until
    /// the process ends.
    pub fn new(client: Client, namespace: &str, list: &str, leadership: Leadership) -> Self {
        let board = Self {
            inner: Arc::new(Inner {
                api: Api::namespaced(client.clone(), namespace),
                client,
                list: Mutex::default(),
                events: Mutex::default(),
                leaders: Mutex::default(),
                name: status_name(list),
                namespace: namespace.to_owned(),
                leadership,
                desired: Mutex::default(),
                removed: Mutex::default(),
                observed: Mutex::default(),
                wake: tokio::sync::Notify::new(),
            }),
        };
        tokio::spawn(write_loop(board.inner.clone()));
        board
    }

    /// The status ConfigMap's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The status ConfigMap's namespace.
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// `guest`'s record and Events are written while `leadership` leads.
    pub fn lead(&self, guest: &str, leadership: Leadership) {
        self.inner
            .leaders
            .lock()
            .expect("board lock")
            .insert(guest.to_owned(), leadership);
        self.inner.wake.notify_one();
    }

    /// Records `record` for `guest`.
    pub fn set(&self, guest: &str, record: Record) {
        self.inner.removed.lock().expect("board lock").remove(guest);
        let mut desired = self.inner.desired.lock().expect("board lock");
        if desired.get(guest) != Some(&record) {
            desired.insert(guest.to_owned(), record);
            drop(desired);
            self.inner.wake.notify_one();
        }
    }

    /// The record of `guest`, as this host last set it.
    pub fn get(&self, guest: &str) -> Option<Record> {
        self.inner
            .desired
            .lock()
            .expect("board lock")
            .get(guest)
            .cloned()
    }

    /// Forgets `guest` (stopped, or removed from the list): its record
    /// goes.
    pub fn remove(&self, guest: &str) {
        self.inner.desired.lock().expect("board lock").remove(guest);
        self.inner.events.lock().expect("board lock").remove(guest);
        self.inner
            .removed
            .lock()
            .expect("board lock")
            .insert(guest.to_owned());
        self.inner.wake.notify_one();
    }

    /// Forgets every guest not in `listed`: their records go.
    pub fn retain(&self, listed: &[&str]) {
        let observed: Vec<String> = self
            .inner
            .observed
            .lock()
            .expect("board lock")
            .iter()
            .flat_map(|o| o.keys().cloned())
            .collect();
        for guest in observed {
            if !listed.contains(&guest.as_str()) {
                self.remove(&guest);
            }
        }
    }

    /// The guest list ConfigMap, which rollout Events are about.
    pub fn set_list(&self, reference: ObjectReference) {
        *self.inner.list.lock().expect("board lock") = Some(reference);
    }

    /// Records an Event about `guest`'s rollout on the guest list ConfigMap
    /// (while this host leads).
    pub fn announce(&self, guest: &str, kind: EventType, reason: Reason, message: String) {
        let Some(reference) = self.inner.list.lock().expect("board lock").clone() else {
            return;
        };
        let mut events = self.inner.events.lock().expect("board lock");
        events
            .entry(guest.to_owned())
            .or_insert_with(|| {
                Events::new(self.inner.client.clone(), guest).fenced_by(self.inner.leader_of(guest))
            })
            .host(&reference, kind, reason, message, "Rollout");
    }

    /// Tells the board what the cluster holds (`None`: no status ConfigMap).
    pub fn observe(&self, cm: Option<&ConfigMap>) {
        let data = cm
            .and_then(|cm| cm.data.clone())
            .unwrap_or_default()
            .into_iter()
            .collect();
        *self.inner.observed.lock().expect("board lock") = Some(data);
        self.inner.wake.notify_one();
    }
}

impl Inner {
    /// Who writes `guest`'s record.
    fn leader_of(&self, guest: &str) -> Leadership {
        self.leaders
            .lock()
            .expect("board lock")
            .get(guest)
            .cloned()
            .unwrap_or_else(|| self.leadership.clone())
    }
}

/// The longest a failed write of the status waits before it is tried again.
const MAX_RETRY: Duration = Duration::from_secs(60);

async fn write_loop(inner: Arc<Inner>) {
    let mut last_error = String::new();
    let mut retry = Duration::ZERO;
    loop {
        let _ = tokio::time::timeout(Duration::from_secs(2), inner.wake.notified()).await;
        tokio::time::sleep(retry).await;
        // Each record is written by its guest's writer; a removed guest's
        // record goes by the host's leader.
        let changes: BTreeMap<String, Option<String>> = {
            let observed = inner.observed.lock().expect("board lock");
            let Some(observed) = observed.as_ref() else {
                continue;
            };
            let mut changes = BTreeMap::new();
            for (guest, record) in inner.desired.lock().expect("board lock").iter() {
                let text = record.to_yaml();
                if observed.get(guest) != Some(&text) && inner.leader_of(guest).is_leader() {
                    changes.insert(guest.clone(), Some(text));
                }
            }
            if inner.leadership.is_leader() {
                for guest in inner.removed.lock().expect("board lock").iter() {
                    if observed.contains_key(guest) {
                        changes.insert(guest.clone(), None);
                    }
                }
            }
            changes
        };
        if changes.is_empty() {
            continue;
        }
        let labels = serde_json::json!({"app.kubernetes.io/managed-by": "wasmop"});
        let patch = serde_json::json!({"metadata": {"labels": labels}, "data": changes});
        let params = PatchParams {
            field_manager: Some(MANAGER.to_owned()),
            ..Default::default()
        };
        let written = match inner
            .api
            .patch(&inner.name, &params, &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": inner.name, "namespace": inner.namespace, "labels": labels},
                    "data": changes.iter().filter_map(|(k, v)| Some((k, v.as_ref()?))).collect::<BTreeMap<_, _>>(),
                }))
                .expect("a ConfigMap");
                let post = kube::api::PostParams {
                    field_manager: Some(MANAGER.to_owned()),
                    ..Default::default()
                };
                inner.api.create(&post, &cm).await
            }
            other => other,
        };
        match written {
            Ok(_) => {
                retry = Duration::ZERO;
                last_error.clear();
                if let Some(observed) = inner.observed.lock().expect("board lock").as_mut() {
                    for (guest, text) in changes {
                        match text {
                            Some(text) => observed.insert(guest, text),
                            None => observed.remove(&guest),
                        };
                    }
                }
            }
            Err(e) => {
                retry = (retry * 2).clamp(Duration::from_secs(1), MAX_RETRY);
                let message = e.to_string();
                if message != last_error {
                    tracing::warn!(
                        configmap = %format!("{}/{}", inner.namespace, inner.name),
                        "could not write the rollout status, retrying: {message}"
                    );
                    last_error = message;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written_with_the_contract_keys() {
        let mut record = Record {
            stable: "a".repeat(64),
            candidate: Some("b".repeat(64)),
            candidate_settings: settings_hash(Some("{}")),
            phase: Phase::Progressing,
            strategy: Some(Strategy::Canary),
            step: 1,
            weight: 10,
            parents_on_candidate: 2,
            failed_reconciles: 0,
            reason: Some("step 1 of 2: 10% of parents".into()),
            cut: None,
            stable_settings: Some("{\"a\":1}".into()),
            stable_source: Some(serde_json::json!({"configMap": {"name": "m", "key": "k"}})),
        };
        record.set_cut(Some(0x00ff_0000_0000_0001));
        let text = record.to_yaml();
        for key in [
            "stable:",
            "candidate:",
            "phase: Progressing",
            "step: 1",
            "parentsOnCandidate: 2",
            "failedReconciles: 0",
            "reason:",
        ] {
            assert!(text.contains(key), "{key} missing in:\n{text}");
        }
        let back: Record = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back, record);
        assert_eq!(back.cut(), Some(0x00ff_0000_0000_0001));
    }

    #[test]
    fn a_stable_record_is_short() {
        let text = Record::stable("abc").to_yaml();
        assert_eq!(
            text,
            "stable: abc\nphase: Stable\nstep: 0\nparentsOnCandidate: 0\nfailedReconciles: 0\n"
        );
    }
}
