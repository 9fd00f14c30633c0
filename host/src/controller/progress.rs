//! No writes without progress: a guest whose answers keep the host writing
//! although nothing but the host's own writes changed is backed off.
//!
//! After each reconcile the host records what it left behind: the parent's
//! spec and metadata (its status is the host's own output, left out) with
//! the module version, each child's resourceVersion, the resourceVersions
//! its own writes produced, and the children it pruned. The next reconcile
//! of that parent asks whether anything *outside* the host changed since:
//! the parent's spec or metadata, a new module version, a child at a
//! resourceVersion the host did not produce, a child gone that the host did
//! not prune. When nothing did, a deterministic, converged guest asks for
//! no write. Then
//! - re-creating a child the host pruned is refused at once
//!   (`ChildRecreated`): a create/delete cycle;
//! - more than [`MAX_SELF_DRIVEN_WRITES`] writing reconciles in a row are
//!   refused (`ChildFlapping`): a guest flipping a child back and forth, or
//!   one whose answer never settles. A few are allowed, because a guest may
//!   step through states it keeps in its own status.
//!
//! A refusal is a retryable failure, so the parent backs off exponentially
//! instead of spinning, and records nothing: it stays refused until
//! something outside the host changes, which starts the count again.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use kube::ResourceExt;
use kube::api::DynamicObject;

use super::index::ChildKey;

/// Writing reconciles in a row that only the host's own writes led to,
/// before the next one is refused.
pub const MAX_SELF_DRIVEN_WRITES: u32 = 3;

/// resourceVersions of its own writes the host remembers per child: enough
/// for the intermediate versions a watch may still deliver.
const OWN_VERSIONS: usize = 4;

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The host pruned this child and nothing else changed since.
    #[error(
        "{kind} {name} was pruned by the host and nothing else changed since; the guest asks for it again (a create/delete cycle)"
    )]
    Recreated {
        /// Child kind.
        kind: String,
        /// Child name.
        name: String,
    },
    /// The guest keeps asking for writes although only the host's own
    /// writes changed its inputs.
    #[error(
        "the guest asked for writes {0} reconciles in a row although nothing but the host's own writes changed; its answer does not settle"
    )]
    Flapping(u32),
}

/// The progress records of one controller's parents, by parent UID.
#[derive(Debug, Default)]
pub struct Progress {
    parents: Mutex<HashMap<String, Record>>,
}

#[derive(Debug, Default, Clone)]
struct Record {
    spec: u64,
    children: HashMap<ChildKey, String>,
    own: HashMap<ChildKey, Vec<String>>,
    pruned: HashSet<ChildKey>,
    streak: u32,
}

/// What a reconcile found: whether only the host's own writes changed its
/// inputs, and what the host pruned before.
#[derive(Debug, Default)]
pub struct Start {
    unchanged: bool,
    pruned: HashSet<ChildKey>,
    own: HashMap<ChildKey, Vec<String>>,
    streak: u32,
}

impl Start {
    /// Whether creating `child` now would re-create one the host pruned.
    pub fn check_create(&self, child: &ChildKey, kind: &str) -> Result<(), Refusal> {
        if self.unchanged && self.pruned.contains(child) {
            return Err(Refusal::Recreated {
                kind: kind.to_owned(),
                name: child.1.clone(),
            });
        }
        Ok(())
    }

    /// Whether this reconcile may write at all.
    pub fn check_write(&self) -> Result<(), Refusal> {
        if self.unchanged && self.streak >= MAX_SELF_DRIVEN_WRITES {
            return Err(Refusal::Flapping(self.streak + 1));
        }
        Ok(())
    }
}

/// The fingerprint of what the host does not write of a parent: its spec
/// and everything else but `status`, its metadata, and the module version.
pub fn spec_fingerprint(parent: &DynamicObject, module: &str) -> u64 {
    let mut h = DefaultHasher::new();
    module.hash(&mut h);
    if let Some(data) = parent.data.as_object() {
        for (k, v) in data.iter().filter(|(k, _)| *k != "status") {
            k.hash(&mut h);
            v.to_string().hash(&mut h);
        }
    }
    parent.metadata.generation.hash(&mut h);
    parent.metadata.deletion_timestamp.is_some().hash(&mut h);
    parent.labels().hash(&mut h);
    parent.annotations().hash(&mut h);
    parent.finalizers().hash(&mut h);
    h.finish()
}

impl Progress {
    /// What a reconcile of the parent `uid` must respect, given the
    /// parent's [`spec_fingerprint`] and its observed children with their
    /// resourceVersions.
    pub fn start(&self, uid: &str, spec: u64, observed: &[(ChildKey, String)]) -> Start {
        let parents = self.parents.lock().expect("progress lock");
        let Some(record) = parents.get(uid) else {
            return Start::default();
        };
        let ours = |key: &ChildKey, rv: &String| {
            record.children.get(key) == Some(rv)
                || record.own.get(key).is_some_and(|v| v.contains(rv))
        };
        let present: HashSet<&ChildKey> = observed.iter().map(|(k, _)| k).collect();
        let unchanged = record.spec == spec
            && observed.iter().all(|(k, rv)| ours(k, rv))
            && record
                .children
                .keys()
                .all(|k| present.contains(k) || record.pruned.contains(k));
        Start {
            unchanged,
            pruned: record.pruned.clone(),
            own: record.own.clone(),
            streak: record.streak,
        }
    }

    /// Records the end of a reconcile that was allowed to run: the spec it
    /// saw, each child's resourceVersion as its writes left it, the
    /// versions it wrote, what it pruned, and whether it wrote at all.
    pub fn finish(&self, uid: &str, start: Start, end: Finish) {
        let streak = match (end.wrote, start.unchanged) {
            (false, _) => 0,
            (true, true) => start.streak + 1,
            (true, false) => 0,
        };
        let mut own = if start.unchanged {
            start.own
        } else {
            HashMap::new()
        };
        for (key, rv) in end.written {
            let versions = own.entry(key).or_default();
            versions.push(rv);
            if versions.len() > OWN_VERSIONS {
                versions.remove(0);
            }
        }
        let mut pruned = if start.unchanged {
            start.pruned
        } else {
            HashSet::new()
        };
        for key in &end.pruned {
            own.remove(key);
        }
        pruned.retain(|k| !end.children.contains_key(k));
        pruned.extend(end.pruned);
        self.parents.lock().expect("progress lock").insert(
            uid.to_owned(),
            Record {
                spec: end.spec,
                children: end.children,
                own,
                pruned,
                streak,
            },
        );
    }

    /// Forgets every parent `live` says is gone (bounded memory).
    pub fn retain(&self, mut live: impl FnMut(&str) -> bool) {
        self.parents
            .lock()
            .expect("progress lock")
            .retain(|uid, _| live(uid));
    }

    /// How many parents are recorded.
    pub fn len(&self) -> usize {
        self.parents.lock().expect("progress lock").len()
    }

    /// Whether no parent is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a reconcile left behind, for [`Progress::finish`].
#[derive(Debug, Default)]
pub struct Finish {
    /// The parent's [`spec_fingerprint`].
    pub spec: u64,
    /// Each child's resourceVersion as the reconcile's writes left it.
    pub children: HashMap<ChildKey, String>,
    /// The resourceVersions its writes produced.
    pub written: Vec<(ChildKey, String)>,
    /// What it pruned.
    pub pruned: HashSet<ChildKey>,
    /// Whether it wrote anything (children or status).
    pub wrote: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ChildKey {
        (0, name.to_owned())
    }

    fn observed(children: &[(&str, &str)]) -> Vec<(ChildKey, String)> {
        children
            .iter()
            .map(|(n, rv)| (key(n), (*rv).to_owned()))
            .collect()
    }

    fn finish(
        spec: u64,
        children: &[(&str, &str)],
        written: &[(&str, &str)],
        pruned: &[&str],
    ) -> Finish {
        Finish {
            spec,
            children: observed(children).into_iter().collect(),
            written: observed(written),
            pruned: pruned.iter().map(|n| key(n)).collect(),
            wrote: !written.is_empty() || !pruned.is_empty(),
        }
    }

    #[test]
    fn re_creating_a_child_the_host_pruned_is_refused_while_nothing_else_changed() {
        let progress = Progress::default();
        // Created x (two versions: the create and the apply mark).
        let start = progress.start("p", 1, &[]);
        progress.finish(
            "p",
            start,
            finish(1, &[("x", "2")], &[("x", "1"), ("x", "2")], &[]),
        );
        // The watch still shows the first version: that is ours too.
        let start = progress.start("p", 1, &observed(&[("x", "1")]));
        assert!(start.unchanged);
        progress.finish("p", start, finish(1, &[], &[], &["x"]));
        let again = progress.start("p", 1, &[]);
        assert!(matches!(
            again.check_create(&key("x"), "ConfigMap"),
            Err(Refusal::Recreated { .. })
        ));
        assert!(again.check_create(&key("y"), "ConfigMap").is_ok());
        // The user changed the parent: the same create is progress.
        let changed = progress.start("p", 2, &[]);
        assert!(changed.check_create(&key("x"), "ConfigMap").is_ok());
    }

    #[test]
    fn a_child_someone_else_changed_or_deleted_is_progress() {
        let progress = Progress::default();
        let start = progress.start("p", 1, &[]);
        progress.finish("p", start, finish(1, &[("x", "5")], &[("x", "5")], &[]));
        assert!(!progress.start("p", 1, &observed(&[("x", "6")])).unchanged);
        assert!(
            !progress.start("p", 1, &[]).unchanged,
            "x vanished without a prune"
        );
        assert!(progress.start("p", 1, &observed(&[("x", "5")])).unchanged);
    }

    #[test]
    fn writes_driven_only_by_the_hosts_own_writes_are_refused_after_a_few() {
        let progress = Progress::default();
        let mut rv = 10;
        let mut start = progress.start("p", 1, &[]);
        for round in 0..=MAX_SELF_DRIVEN_WRITES {
            assert!(start.check_write().is_ok(), "round {round}");
            rv += 1;
            let rv_text = rv.to_string();
            progress.finish(
                "p",
                start,
                finish(1, &[("x", &rv_text)], &[("x", &rv_text)], &[]),
            );
            start = progress.start("p", 1, &observed(&[("x", &rv_text)]));
        }
        assert!(matches!(start.check_write(), Err(Refusal::Flapping(_))));
        // A reconcile that writes nothing resets it.
        let rv_text = rv.to_string();
        progress.finish("p", start, finish(1, &[("x", &rv_text)], &[], &[]));
        assert!(
            progress
                .start("p", 1, &observed(&[("x", &rv_text)]))
                .check_write()
                .is_ok()
        );
    }

    #[test]
    fn gone_parents_are_forgotten() {
        let progress = Progress::default();
        for uid in ["a", "b"] {
            let start = progress.start(uid, 1, &[]);
            progress.finish(uid, start, Finish::default());
        }
        progress.retain(|uid| uid == "a");
        assert_eq!(progress.len(), 1);
    }
}
