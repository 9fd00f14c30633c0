//! What is seen of a candidate while it serves: its failed reconciles in
//! the current step, and whether the parents it serves show their ready
//! condition.
//!
//! Reconciles report here as they end; the rollout's driver reads the
//! verdict ([`Tracker::verdict`]) on every tick and at once when a failure
//! wakes it. A moved parent is tracked from its first reconcile on the
//! candidate: whether it showed the ready condition True then (before the
//! candidate's status was written), and whether the candidate's latest
//! answer shows it True. One that showed it before must show it again, and
//! keep showing it, from `progressDeadline` after it moved on.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// Why a step failed, with one parent it failed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong, for people.
    pub reason: String,
    /// `namespace/name` of a parent it went wrong on.
    pub parent: String,
}

#[derive(Debug)]
struct Moved {
    key: String,
    since: Instant,
    was_ready: bool,
    ready: bool,
}

#[derive(Debug, Default)]
struct State {
    /// The condition type moved parents must show True.
    ready_condition: Option<String>,
    /// Parents at or below this position that show the ready condition
    /// at all count as ready before they moved: they moved before this
    /// host resumed the rollout, so it did not see them move.
    assume_ready_up_to: Option<u64>,
    failed: u32,
    first_failure: Option<Failure>,
    moved: HashMap<String, Moved>,
    shadow_reported: HashSet<String>,
}

/// The outcomes of one candidate version.
#[derive(Debug, Default)]
pub struct Tracker {
    state: Mutex<State>,
    wake: tokio::sync::Notify,
}

/// Whether `status` shows `condition` True: `Some(true)`/`Some(false)` when
/// it lists the condition, `None` when it does not.
pub fn shows(status: Option<&Map<String, Value>>, condition: &str) -> Option<bool> {
    status?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(condition))
        .map(|c| c.get("status").and_then(Value::as_str) == Some("True"))
}

impl State {
    /// The parent `key` (with `uid`) as moved to the candidate, recorded
    /// the first time the candidate handles it: whether it showed the
    /// ready condition True then (`before`), or, for a parent this host did
    /// not see move, whether it shows the condition at all.
    fn moved(&mut self, uid: &str, key: &str, before: Option<bool>) -> &mut Moved {
        let moved_before = self
            .assume_ready_up_to
            .is_some_and(|cut| super::side::position(uid) <= cut);
        let was_ready = before == Some(true) || (moved_before && before.is_some());
        self.moved.entry(uid.to_owned()).or_insert_with(|| Moved {
            key: key.to_owned(),
            since: Instant::now(),
            was_ready,
            ready: was_ready,
        })
    }
}

impl Tracker {
    /// A tracker with nothing seen yet, watching `ready_condition`.
    pub fn new(ready_condition: Option<String>) -> Self {
        let tracker = Self::default();
        tracker.set_ready_condition(ready_condition);
        tracker
    }

    /// Watches `condition` from now on.
    pub fn set_ready_condition(&self, condition: Option<String>) {
        self.state.lock().expect("tracker lock").ready_condition = condition;
    }

    /// The condition moved parents must show True.
    pub fn ready_condition(&self) -> Option<String> {
        self.state
            .lock()
            .expect("tracker lock")
            .ready_condition
            .clone()
    }

    /// A parent at or below `cut` first seen on the candidate from now on
    /// counts as one that showed the ready condition True before it moved
    /// if it shows the condition at all: this host resumed the rollout
    /// with those parents already moved and did not see them move.
    pub fn assume_ready_up_to(&self, cut: Option<u64>) {
        self.state.lock().expect("tracker lock").assume_ready_up_to = cut;
    }

    /// The step's failures before this host resumed it.
    pub fn seed_failed(&self, failed: u32) {
        let mut state = self.state.lock().expect("tracker lock");
        state.failed = state.failed.max(failed);
    }

    /// Forgets everything seen: a canary starts again.
    pub fn reset(&self) {
        let mut state = self.state.lock().expect("tracker lock");
        let ready_condition = state.ready_condition.take();
        *state = State {
            ready_condition,
            ..State::default()
        };
    }

    /// A reconcile of the parent `key` (with `uid`) failed on the candidate
    /// for `reason`; `before`: what the parent showed of its ready
    /// condition then (True, False, or `None` without the condition). A
    /// parent whose first reconcile on the candidate failed is watched for
    /// readiness as one whose first one succeeded.
    pub fn failed(&self, uid: &str, key: &str, reason: String, before: Option<bool>) {
        let mut state = self.state.lock().expect("tracker lock");
        state.failed += 1;
        state.first_failure.get_or_insert_with(|| Failure {
            reason,
            parent: key.to_owned(),
        });
        state.moved(uid, key, before);
        drop(state);
        self.wake.notify_one();
    }

    /// A reconcile of the parent `key` succeeded on the candidate: what
    /// the parent showed of its ready condition when the candidate answered
    /// (`before`: True, False, or `None` without the condition), and what
    /// the answer shows (`ready`; `None`: the answer does not say).
    pub fn answered(&self, uid: &str, key: &str, before: Option<bool>, ready: Option<bool>) {
        let mut state = self.state.lock().expect("tracker lock");
        let moved = state.moved(uid, key, before);
        if let Some(ready) = ready {
            moved.ready = ready;
        }
    }

    /// Forgets the parents with these uids (they went back to the stable
    /// version or are gone).
    pub fn forget(&self, mut gone: impl FnMut(&str) -> bool) {
        self.state
            .lock()
            .expect("tracker lock")
            .moved
            .retain(|uid, _| !gone(uid));
    }

    /// A new step starts: its failures count from zero.
    pub fn new_step(&self) {
        let mut state = self.state.lock().expect("tracker lock");
        state.failed = 0;
        state.first_failure = None;
    }

    /// Failed reconciles in the current step.
    pub fn failed_reconciles(&self) -> u32 {
        self.state.lock().expect("tracker lock").failed
    }

    /// Why the current step fails, if it does: more than `max_failed`
    /// failed reconciles, or a parent that showed its ready condition and
    /// does not show it `deadline` after it moved (`None`: readiness is not
    /// watched).
    pub fn verdict(&self, max_failed: u32, deadline: Option<Duration>) -> Option<Failure> {
        let state = self.state.lock().expect("tracker lock");
        if state.failed > max_failed {
            let first = state.first_failure.clone().unwrap_or(Failure {
                reason: "a reconcile failed".into(),
                parent: String::new(),
            });
            return Some(Failure {
                reason: format!(
                    "{} reconciles failed on the candidate (at most {max_failed} allowed); first: {}",
                    state.failed, first.reason
                ),
                parent: first.parent,
            });
        }
        let deadline = deadline?;
        let now = Instant::now();
        let mut late: Vec<&Moved> = state
            .moved
            .values()
            .filter(|m| m.was_ready && !m.ready && now.duration_since(m.since) >= deadline)
            .collect();
        late.sort_by(|a, b| a.key.cmp(&b.key));
        let first = late.first()?;
        Some(Failure {
            reason: format!(
                "{} parent(s) that were ready did not show their ready condition again within {deadline:?} of moving to the candidate",
                late.len()
            ),
            parent: first.key.clone(),
        })
    }

    /// Whether the parent with `uid` already got its `ShadowDifferent`
    /// Event for this candidate; records that it has now.
    pub fn first_difference(&self, uid: &str) -> bool {
        self.state
            .lock()
            .expect("tracker lock")
            .shadow_reported
            .insert(uid.to_owned())
    }

    /// Waits until a failure is reported (or `timeout` passes).
    pub async fn changed(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.wake.notified()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn a_condition_shows_true_false_or_not_at_all() {
        let s = status(json!({"conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Progressing", "status": "False"}]}));
        assert_eq!(shows(Some(&s), "Available"), Some(true));
        assert_eq!(shows(Some(&s), "Progressing"), Some(false));
        assert_eq!(shows(Some(&s), "Ready"), None);
        assert_eq!(shows(None, "Ready"), None);
    }

    #[test]
    fn more_failures_than_allowed_fail_the_step_naming_the_first() {
        let tracker = Tracker::new(None);
        tracker.failed("u1", "ns/a", "GuestTrap: boom".into(), None);
        assert_eq!(tracker.verdict(1, None), None);
        tracker.failed("u2", "ns/b", "ReconcileFailed".into(), None);
        let failure = tracker.verdict(1, None).unwrap();
        assert_eq!(failure.parent, "ns/a");
        assert!(
            failure.reason.contains("2 reconciles failed"),
            "{failure:?}"
        );
        assert!(failure.reason.contains("GuestTrap: boom"), "{failure:?}");
        tracker.new_step();
        assert_eq!(tracker.verdict(1, None), None);
    }

    #[test]
    fn a_ready_parent_must_be_ready_again_by_the_deadline() {
        let tracker = Tracker::new(Some("Ready".into()));
        // Ready before the move, and the candidate says so at first ...
        tracker.answered("u1", "ns/a", Some(true), Some(true));
        // ... then no longer.
        tracker.answered("u1", "ns/a", Some(true), Some(false));
        // Never ready: not watched.
        tracker.answered("u2", "ns/b", Some(false), Some(false));
        assert_eq!(tracker.verdict(0, Some(Duration::from_secs(60))), None);
        let failure = tracker.verdict(0, Some(Duration::ZERO)).unwrap();
        assert_eq!(failure.parent, "ns/a");
        tracker.answered("u1", "ns/a", Some(true), Some(true));
        assert_eq!(tracker.verdict(0, Some(Duration::ZERO)), None);
        assert_eq!(tracker.verdict(0, None), None);
    }

    #[test]
    fn a_ready_parent_whose_first_reconcile_failed_is_still_watched_for_readiness() {
        let tracker = Tracker::new(Some("Ready".into()));
        // Ready before the move; the candidate's first reconcile fails ...
        tracker.failed("u1", "ns/a", "ReconcileFailed: once".into(), Some(true));
        // ... and its answers from then on say it is not ready.
        tracker.answered("u1", "ns/a", Some(true), Some(false));
        let failure = tracker.verdict(1, Some(Duration::ZERO)).unwrap();
        assert_eq!(failure.parent, "ns/a");
        assert!(failure.reason.contains("were ready"), "{failure:?}");
        tracker.answered("u1", "ns/a", Some(false), Some(true));
        assert_eq!(tracker.verdict(1, Some(Duration::ZERO)), None);
    }

    #[test]
    fn a_resumed_rollout_watches_every_parent_that_shows_the_condition() {
        let tracker = Tracker::new(Some("Ready".into()));
        let (low, high) = if super::super::side::position("u1") < super::super::side::position("u3")
        {
            ("u1", "u3")
        } else {
            ("u3", "u1")
        };
        tracker.assume_ready_up_to(Some(super::super::side::position(low)));
        tracker.answered(low, "ns/a", Some(false), Some(false));
        tracker.answered("u2", "ns/b", None, None);
        // Moved after the resume: this host saw it was not ready.
        tracker.answered(high, "ns/c", Some(false), Some(false));
        let failure = tracker.verdict(0, Some(Duration::ZERO)).unwrap();
        assert_eq!(failure.parent, "ns/a");
        assert!(failure.reason.starts_with("1 parent(s)"), "{failure:?}");
        tracker.reset();
        assert_eq!(tracker.verdict(0, Some(Duration::ZERO)), None);
        assert_eq!(tracker.ready_condition().as_deref(), Some("Ready"));
    }

    #[test]
    fn a_resumed_step_keeps_the_failures_recorded_before() {
        let tracker = Tracker::new(None);
        tracker.seed_failed(1);
        assert!(tracker.verdict(0, None).is_some());
        assert_eq!(tracker.verdict(1, None), None);
    }

    #[test]
    fn a_parent_gets_one_shadow_difference_per_candidate() {
        let tracker = Tracker::new(None);
        assert!(tracker.first_difference("u1"));
        assert!(!tracker.first_difference("u1"));
        assert!(tracker.first_difference("u2"));
    }
}
