//! The parents as the host's own latest writes left them, until the
//! watch delivers those writes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::DynamicObject;

use super::compact::Compact;

/// The parent as the host's latest write of it left it, per parent UID,
/// with the resourceVersions that write and the host's earlier ones
/// replaced. The controller's store learns of a write only when the watch
/// delivers it: a reconcile that starts before then would compare its
/// answer with the status before the host's own patch, find nothing to
/// write, and the status-only event that follows reconciles nothing.
#[derive(Default)]
pub struct LastWrites(Mutex<HashMap<String, LastWrite>>);

struct LastWrite {
    superseded: HashSet<String>,
    /// The versions the host's writes made, until the store has the latest.
    own: HashSet<String>,
    latest: Arc<DynamicObject>,
}

impl LastWrites {
    /// The parent a reconcile decides on: the host's own last write while
    /// the store is behind it; otherwise the store's copy as it is now
    /// (`now`, read only after that check), which may have moved past
    /// `dispatched`, the copy the queue handed over before the reconcile
    /// waited for its turn: the watch may have delivered the host's write,
    /// and [`Self::seen`] forgotten it, in between.
    pub fn decide_on(
        &self,
        dispatched: &Compact,
        now: impl FnOnce() -> Option<Arc<Compact>>,
    ) -> Arc<DynamicObject> {
        if let Some(latest) = self.fresher(&dispatched.metadata) {
            return latest;
        }
        let moved =
            now().filter(|c| c.metadata.resource_version != dispatched.metadata.resource_version);
        Arc::new(moved.as_deref().unwrap_or(dispatched).object())
    }

    /// Forgets the write the store's copy of a parent (its `metadata`) has
    /// caught up with (or moved past), so an entry lives only while the
    /// store is behind: a converged parent may never be reconciled again.
    pub fn seen(&self, metadata: &ObjectMeta) {
        let _ = self.fresher(metadata);
    }

    /// Whether the version `metadata` names is one the host's own write
    /// made (and the store has not caught up with its latest write yet).
    pub fn is_own(&self, metadata: &ObjectMeta) -> bool {
        let (Some(uid), Some(version)) = (&metadata.uid, &metadata.resource_version) else {
            return false;
        };
        let writes = self.0.lock().expect("last writes lock");
        writes.get(uid).is_some_and(|w| w.own.contains(version))
    }

    /// The parent as the host's latest write left it, when the store's
    /// `parent` is still at a version that write replaced, or at one older
    /// than it (a write the host saw fail but that landed, or another
    /// writer's, delivered late: resourceVersions compare as integers,
    /// as Kubernetes guarantees since 1.35); `None` when the store has
    /// caught up (or moved past it), which forgets the write.
    fn fresher(&self, parent: &ObjectMeta) -> Option<Arc<DynamicObject>> {
        let (uid, version) = (parent.uid.clone()?, parent.resource_version.clone()?);
        let mut writes = self.0.lock().expect("last writes lock");
        let write = writes.get(&uid)?;
        let older = match (version.parse::<u64>(), write.latest.resource_version()) {
            (Ok(seen), Some(latest)) => latest.parse::<u64>().is_ok_and(|l| seen < l),
            _ => false,
        };
        // A spec change the host's write does not have wins, whatever the
        // versions say.
        let newer_spec = parent.generation > write.latest.metadata.generation;
        if !newer_spec && (older || write.superseded.contains(&version)) {
            return Some(write.latest.clone());
        }
        writes.remove(&uid);
        None
    }

    /// Records that a write turned `before` into `written`.
    pub fn remember(&self, before: &DynamicObject, written: &DynamicObject) {
        let (Some(uid), Some(version)) = (before.uid(), before.resource_version()) else {
            return;
        };
        let mut latest = written.clone();
        latest.metadata.managed_fields = None;
        let mut writes = self.0.lock().expect("last writes lock");
        let (mut superseded, mut own) = match writes.remove(&uid) {
            Some(w) if w.latest.resource_version().as_deref() == Some(version.as_str()) => {
                (w.superseded, w.own)
            }
            Some(w) => (HashSet::new(), w.own),
            None => (HashSet::new(), HashSet::new()),
        };
        superseded.insert(version);
        own.extend(latest.resource_version());
        writes.insert(
            uid,
            LastWrite {
                superseded,
                own,
                latest: Arc::new(latest),
            },
        );
    }

    /// Forgets the writes of parents `live` says are gone.
    pub fn retain(&self, mut live: impl FnMut(&str) -> bool) {
        self.0
            .lock()
            .expect("last writes lock")
            .retain(|uid, _| live(uid));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(version: &str, phase: &str) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "P",
            "metadata": {"name": "p", "uid": "u", "resourceVersion": version},
            "status": {"phase": phase}}))
        .unwrap()
    }

    #[test]
    fn a_store_behind_the_hosts_writes_is_read_as_the_latest_write() {
        let writes = LastWrites::default();
        let stale = at("1", "Ready");
        assert!(writes.fresher(&stale.metadata).is_none());
        writes.remember(&stale, &at("2", "Progressing"));
        writes.remember(&at("2", "Progressing"), &at("3", "Progressing"));
        for behind in ["1", "2"] {
            let fresher = writes.fresher(&at(behind, "Ready").metadata).unwrap();
            assert_eq!(fresher.resource_version().as_deref(), Some("3"));
        }
        // Caught up: the store is read again, and the write forgotten.
        assert!(writes.fresher(&at("3", "Progressing").metadata).is_none());
        assert!(writes.fresher(&at("1", "Ready").metadata).is_none());
    }

    #[test]
    fn a_store_at_a_version_between_the_hosts_writes_is_still_behind() {
        let writes = LastWrites::default();
        // The host's status write at 2 failed as far as it knew, but
        // landed; its next write, from 1, made 3.
        writes.remember(&at("1", "Ready"), &at("3", "Progressing"));
        let fresher = writes.fresher(&at("2", "Pending").metadata).unwrap();
        assert_eq!(fresher.resource_version().as_deref(), Some("3"));
        assert!(writes.fresher(&at("3", "Progressing").metadata).is_none());
        // A store with a newer spec is never behind.
        writes.remember(&at("1", "Ready"), &at("3", "Progressing"));
        let mut edited = at("2", "Ready");
        edited.metadata.generation = Some(2);
        assert!(writes.fresher(&edited.metadata).is_none());
    }

    #[test]
    fn a_write_is_kept_only_until_the_watch_delivers_it() {
        let writes = LastWrites::default();
        writes.remember(&at("1", "Ready"), &at("2", "Progressing"));
        writes.remember(&at("2", "Progressing"), &at("4", "Ready"));
        // The watch delivers the host's first write, then the second.
        assert!(writes.is_own(&at("2", "Progressing").metadata));
        assert!(!writes.is_own(&at("1", "Ready").metadata));
        writes.seen(&at("2", "Progressing").metadata);
        assert_eq!(writes.0.lock().unwrap().len(), 1);
        assert!(writes.is_own(&at("4", "Ready").metadata));
        writes.seen(&at("4", "Ready").metadata);
        assert!(writes.0.lock().unwrap().is_empty());
        assert!(!writes.is_own(&at("4", "Ready").metadata));
        assert!(writes.fresher(&at("2", "Progressing").metadata).is_none());
    }

    #[test]
    fn a_reconcile_handed_a_copy_before_the_watch_caught_up_decides_on_the_write() {
        let writes = LastWrites::default();
        let dispatched = Compact::from(at("1", "Ready"));
        writes.remember(&at("1", "Ready"), &at("2", "Progressing"));
        // The store is still behind: the host's write.
        let decided = writes.decide_on(&dispatched, || Some(Arc::new(dispatched.clone())));
        assert_eq!(decided.resource_version().as_deref(), Some("2"));
        // The watch delivers the write (and the write is forgotten) while
        // the reconcile handed version 1 waits for its turn: the store's
        // copy now.
        writes.seen(&at("2", "Progressing").metadata);
        let now = Arc::new(Compact::from(at("2", "Progressing")));
        let decided = writes.decide_on(&dispatched, || Some(now.clone()));
        assert_eq!(decided.resource_version().as_deref(), Some("2"));
        assert_eq!(decided.data["status"]["phase"], "Progressing");
        // A parent gone from the store: the copy handed over.
        let decided = writes.decide_on(&dispatched, || None);
        assert_eq!(decided.resource_version().as_deref(), Some("1"));
    }

    #[test]
    fn a_store_past_the_hosts_write_wins() {
        let writes = LastWrites::default();
        writes.remember(&at("1", "Ready"), &at("2", "Progressing"));
        assert!(writes.fresher(&at("5", "Ready").metadata).is_none());
        writes.remember(&at("7", "Ready"), &at("8", "Ready"));
        writes.retain(|_| false);
        assert!(writes.fresher(&at("7", "Ready").metadata).is_none());
    }
}
