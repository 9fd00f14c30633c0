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
//!
//! The other way round, a child another writer keeps changing (a field
//! manager fighting the guest's) is *contested*: the host corrects it
//! [`FREE_CORRECTIONS`] times at once, then waits 1 s, 2 s, 4 s, ... (at
//! most [`MAX_CONTEST_DELAY`]) between corrections, and forgets the
//! contest after [`CONTEST_MEMORY`] without one. A correction it defers is
//! not a failure: the reconcile writes everything else and comes back when
//! the wait is over, so the host wins once the other writer stops.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;

use super::index::ChildKey;

/// Writing reconciles in a row that only the host's own writes led to,
/// before the next one is refused.
pub const MAX_SELF_DRIVEN_WRITES: u32 = 3;

/// Corrections of a contested child made at once, before the host waits
/// between them.
pub const FREE_CORRECTIONS: u32 = 3;
/// The first wait between corrections; it doubles with each.
const FIRST_CONTEST_DELAY: Duration = Duration::from_secs(1);
/// The longest wait between corrections.
pub const MAX_CONTEST_DELAY: Duration = Duration::from_secs(60);
/// How long a contest is remembered after its last correction.
pub const CONTEST_MEMORY: Duration = Duration::from_secs(120);

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
    contests: HashMap<ChildKey, Contest>,
}

/// Corrections of one child another writer keeps changing.
#[derive(Debug, Clone, Copy)]
struct Contest {
    corrections: u32,
    last: Instant,
    next: Instant,
}

/// What a reconcile found: whether only the host's own writes changed its
/// inputs, and what the host pruned before.
#[derive(Debug, Default)]
pub struct Start {
    unchanged: bool,
    pruned: HashSet<ChildKey>,
    own: HashMap<ChildKey, Vec<String>>,
    streak: u32,
    /// Children someone else changed while the parent did not change.
    foreign: HashSet<ChildKey>,
    contests: HashMap<ChildKey, Contest>,
}

/// A correction of a contested child put off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deferred {
    /// Corrections made so far.
    pub corrections: u32,
    /// When the next one may be made.
    pub retry_in: Duration,
}

impl Start {
    /// Whether creating `child` now would re-create one the host pruned.
    pub fn check_create(&self, child: &ChildKey, kind: &str) -> Result<(), Refusal> {
        if self.unchanged && self.pruned.contains(child) {
            return Err(Refusal::Recreated {
                kind: kind.to_owned(),
                name: child.2.clone(),
            });
        }
        Ok(())
    }

    /// Whether re-applying the observed `child` may happen now: `Ok(true)`
    /// when it corrects someone else's change (the caller records it in
    /// [`Finish::corrected`]), `Ok(false)` when it is no correction, and
    /// [`Deferred`] when the child is contested and the wait is not over.
    pub fn check_correction(&self, child: &ChildKey) -> Result<bool, Deferred> {
        if !self.foreign.contains(child) {
            return Ok(false);
        }
        match self.contests.get(child) {
            Some(c) if c.corrections >= FREE_CORRECTIONS => {
                let now = Instant::now();
                if now < c.next {
                    Err(Deferred {
                        corrections: c.corrections,
                        retry_in: c.next - now,
                    })
                } else {
                    Ok(true)
                }
            }
            _ => Ok(true),
        }
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
    super::compact::spec_hash(parent).hash(&mut h);
    h.finish()
}

/// The fingerprint of a parent's related objects: each one's identity and
/// resourceVersion.
pub fn related_fingerprint(related: &[std::sync::Arc<DynamicObject>]) -> u64 {
    let mut h = DefaultHasher::new();
    for object in related {
        object.types.as_ref().map(|t| &t.kind).hash(&mut h);
        object.metadata.name.hash(&mut h);
        object.metadata.resource_version.hash(&mut h);
    }
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
        let foreign = if record.spec == spec {
            observed
                .iter()
                .filter(|(k, rv)| record.children.contains_key(k) && !ours(k, rv))
                .map(|(k, _)| k.clone())
                .collect()
        } else {
            HashSet::new()
        };
        let contests = record
            .contests
            .iter()
            .filter(|(_, c)| c.last.elapsed() < CONTEST_MEMORY)
            .map(|(k, c)| (k.clone(), *c))
            .collect();
        Start {
            unchanged,
            pruned: record.pruned.clone(),
            own: record.own.clone(),
            streak: record.streak,
            foreign,
            contests,
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
        let mut contests = start.contests;
        let now = Instant::now();
        for key in end.corrected {
            let contest = contests.entry(key).or_insert(Contest {
                corrections: 0,
                last: now,
                next: now,
            });
            contest.corrections += 1;
            contest.last = now;
            contest.next = now + contest_delay(contest.corrections);
        }
        contests.retain(|k, _| end.children.contains_key(k));
        self.parents.lock().expect("progress lock").insert(
            uid.to_owned(),
            Record {
                spec: end.spec,
                children: end.children,
                own,
                pruned,
                streak,
                contests,
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

/// The wait after the `n`-th correction of a contested child.
fn contest_delay(n: u32) -> Duration {
    match n.checked_sub(FREE_CORRECTIONS) {
        None => Duration::ZERO,
        Some(k) => FIRST_CONTEST_DELAY
            .saturating_mul(1 << k.min(16))
            .min(MAX_CONTEST_DELAY),
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
    /// Children it re-applied over someone else's change.
    pub corrected: Vec<ChildKey>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ChildKey {
        (0, Some("ns".to_owned()), name.to_owned())
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
            corrected: Vec::new(),
        }
    }

    #[test]
    fn a_child_someone_else_keeps_changing_is_corrected_three_times_then_with_waits() {
        let progress = Progress::default();
        let start = progress.start("p", 1, &[]);
        progress.finish("p", start, finish(1, &[("x", "1")], &[("x", "1")], &[]));
        let mut rv = 1;
        for n in 1..=FREE_CORRECTIONS {
            // Another writer changed x; the host's correction is allowed.
            rv += 1;
            let theirs = rv.to_string();
            let start = progress.start("p", 1, &observed(&[("x", &theirs)]));
            assert_eq!(
                start.check_correction(&key("x")),
                Ok(true),
                "correction {n}"
            );
            rv += 1;
            let ours = rv.to_string();
            let mut end = finish(1, &[("x", &ours)], &[("x", &ours)], &[]);
            end.corrected.push(key("x"));
            progress.finish("p", start, end);
        }
        rv += 1;
        let theirs = rv.to_string();
        let start = progress.start("p", 1, &observed(&[("x", &theirs)]));
        let deferred = start.check_correction(&key("x")).unwrap_err();
        assert_eq!(deferred.corrections, FREE_CORRECTIONS);
        assert!(
            deferred.retry_in > Duration::from_millis(900)
                && deferred.retry_in <= Duration::from_secs(1)
        );
        // A child only the host's writes touched is no correction at all.
        let own = progress.start("p", 1, &observed(&[("x", "7")]));
        assert_eq!(own.check_correction(&key("x")), Ok(false));
        // A changed parent makes the write the guest's new wish, not a correction.
        let changed = progress.start("p", 2, &observed(&[("x", &theirs)]));
        assert_eq!(changed.check_correction(&key("x")), Ok(false));
    }

    #[test]
    fn the_waits_between_corrections_double_up_to_a_minute() {
        assert_eq!(contest_delay(1), Duration::ZERO);
        assert_eq!(contest_delay(FREE_CORRECTIONS), Duration::from_secs(1));
        assert_eq!(contest_delay(FREE_CORRECTIONS + 1), Duration::from_secs(2));
        assert_eq!(contest_delay(FREE_CORRECTIONS + 4), Duration::from_secs(16));
        assert_eq!(contest_delay(200), MAX_CONTEST_DELAY);
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
