//! `metav1.Condition` helpers that keep a converged status byte-identical.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The status of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Cannot tell.
    Unknown,
}

impl ConditionStatus {
    /// The string Kubernetes uses: "True", "False" or "Unknown".
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(holds: bool) -> Self {
        if holds { Self::True } else { Self::False }
    }
}

/// Sets the condition `type_` in `conditions`, adding it if missing, and
/// returns whether anything changed.
///
/// `lastTransitionTime` becomes `now` only when the status changes (or the
/// condition is new); a condition whose status stays the same keeps its
/// time, so reconciling a converged object yields exactly the status it
/// already has and the host writes nothing. Reason, message and
/// observedGeneration are always brought up to date.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) else {
        conditions.push(Condition {
            type_: type_.to_owned(),
            status: status.as_str().to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            observed_generation,
            last_transition_time: now.clone(),
        });
        return true;
    };
    let mut changed = false;
    if existing.status != status.as_str() {
        existing.status = status.as_str().to_owned();
        existing.last_transition_time = now.clone();
        changed = true;
    }
    if existing.reason != reason {
        existing.reason = reason.to_owned();
        changed = true;
    }
    if existing.message != message {
        existing.message = message.to_owned();
        changed = true;
    }
    if existing.observed_generation != observed_generation {
        existing.observed_generation = observed_generation;
        changed = true;
    }
    changed
}

/// The condition of type `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when the condition `type_` is present with status "True".
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::time_at;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(seconds: u64) -> Time {
        time_at(UNIX_EPOCH + Duration::from_secs(seconds))
    }

    #[test]
    fn a_new_condition_is_added_with_the_current_time() {
        let mut conditions = Vec::new();
        let changed = set_condition(
            &mut conditions,
            "Available",
            ConditionStatus::True,
            "Ready",
            "2/2 ready",
            Some(1),
            &at(100),
        );
        assert!(changed);
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].last_transition_time, at(100));
        assert_eq!(conditions[0].observed_generation, Some(1));
    }

    #[test]
    fn setting_the_same_condition_again_changes_nothing() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            "Available",
            true.into(),
            "R",
            "m",
            Some(1),
            &at(100),
        );
        let before = conditions.clone();
        let changed = set_condition(
            &mut conditions,
            "Available",
            true.into(),
            "R",
            "m",
            Some(1),
            &at(200),
        );
        assert!(!changed);
        assert_eq!(conditions, before);
    }

    #[test]
    fn a_new_message_keeps_the_transition_time_when_the_status_holds() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            "Progressing",
            true.into(),
            "R",
            "1/2",
            Some(1),
            &at(100),
        );
        let changed = set_condition(
            &mut conditions,
            "Progressing",
            true.into(),
            "S",
            "2/2",
            Some(2),
            &at(200),
        );
        assert!(changed);
        assert_eq!(conditions[0].last_transition_time, at(100));
        assert_eq!(conditions[0].reason, "S");
        assert_eq!(conditions[0].message, "2/2");
        assert_eq!(conditions[0].observed_generation, Some(2));
    }

    #[test]
    fn a_status_change_moves_the_transition_time() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            "Available",
            false.into(),
            "R",
            "m",
            Some(1),
            &at(100),
        );
        set_condition(
            &mut conditions,
            "Available",
            true.into(),
            "R",
            "m",
            Some(1),
            &at(200),
        );
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].last_transition_time, at(200));
    }

    #[test]
    fn other_conditions_are_left_in_place() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, "A", true.into(), "R", "m", None, &at(1));
        set_condition(&mut conditions, "B", false.into(), "R", "m", None, &at(1));
        set_condition(&mut conditions, "A", false.into(), "R", "m", None, &at(2));
        let types: Vec<_> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["A", "B"]);
        assert!(!is_condition_true(&conditions, "A"));
        assert!(find_condition(&conditions, "B").is_some());
        assert!(find_condition(&conditions, "C").is_none());
    }

    #[test]
    fn unknown_status_is_spelled_like_kubernetes() {
        assert_eq!(ConditionStatus::Unknown.as_str(), "Unknown");
    }
}
