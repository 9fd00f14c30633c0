//! A guest list entry's `rollout` (interface contract):
//!
//! ```yaml
//! rollout:
//!   strategy: Canary          # Immediate (default) | Shadow | Canary
//!   steps: [10, 50]           # Canary: percent of parents on the candidate, then 100
//!   stepDuration: 60s         # how long each step is held and watched
//!   maxFailedReconciles: 0    # failures of the candidate tolerated per step
//!   readyCondition: Ready     # condition a moved parent must (again) show True
//!   progressDeadline: 2m      # ... within this long after it moved
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::runtime::limits::parse_duration;

/// How a new module version of a guest reaches its parents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Strategy {
    /// Every parent runs the new version at once (a hot swap).
    #[default]
    Immediate,
    /// The running version keeps serving; the new one answers the same
    /// requests beside it, compared and never applied.
    Shadow,
    /// Parents move to the new version step by step, watched; a failed step
    /// moves them all back.
    Canary,
}

impl Strategy {
    /// The strategy as the guest list spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Immediate => "Immediate",
            Self::Shadow => "Shadow",
            Self::Canary => "Canary",
        }
    }
}

/// The `rollout` of a guest list entry, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutEntry {
    /// `Immediate`, `Shadow` or `Canary`.
    #[serde(default)]
    pub strategy: Strategy,
    /// Canary: percent of parents on the candidate at each step.
    #[serde(default)]
    pub steps: Option<Vec<u8>>,
    /// How long each step is held, e.g. `60s`.
    #[serde(default)]
    pub step_duration: Option<String>,
    /// Failed reconciles of the candidate tolerated per step.
    #[serde(default)]
    pub max_failed_reconciles: Option<u32>,
    /// The condition a moved parent must show True.
    #[serde(default)]
    pub ready_condition: Option<String>,
    /// How long after it moved a parent has to show it, e.g. `2m`.
    #[serde(default)]
    pub progress_deadline: Option<String>,
}

/// How a guest's new versions roll out, defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutSettings {
    /// The strategy.
    pub strategy: Strategy,
    /// Canary: percent of parents on the candidate at each step, rising,
    /// each in 1..=100; after the last the candidate is promoted.
    pub steps: Vec<u8>,
    /// How long each step is held and watched.
    pub step_duration: Duration,
    /// Failed reconciles of moved parents on the candidate tolerated in one
    /// step.
    pub max_failed_reconciles: u32,
    /// The condition type a moved parent that showed it True must show
    /// True again; none: readiness is not watched.
    pub ready_condition: Option<String>,
    /// How long after it moved a parent has to show `ready_condition`.
    pub progress_deadline: Duration,
}

/// Default Canary steps: a tenth of the parents, then half.
pub const DEFAULT_STEPS: [u8; 2] = [10, 50];
/// Default time a step is held.
pub const DEFAULT_STEP_DURATION: Duration = Duration::from_secs(60);
/// Default time a moved parent has to show its ready condition again.
pub const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(120);

impl Default for RolloutSettings {
    fn default() -> Self {
        Self {
            strategy: Strategy::Immediate,
            steps: DEFAULT_STEPS.to_vec(),
            step_duration: DEFAULT_STEP_DURATION,
            max_failed_reconciles: 0,
            ready_condition: Some("Ready".to_owned()),
            progress_deadline: DEFAULT_PROGRESS_DEADLINE,
        }
    }
}

impl RolloutSettings {
    /// Whether a new version goes through a rollout (not a plain swap).
    pub fn is_progressive(&self) -> bool {
        self.strategy != Strategy::Immediate
    }
}

impl RolloutEntry {
    /// The settings, checked, defaults filled in.
    pub fn settings(&self) -> Result<RolloutSettings, String> {
        let d = RolloutSettings::default();
        let steps = self.steps.clone().unwrap_or(d.steps);
        if steps.is_empty() {
            return Err("rollout.steps must list at least one percentage".into());
        }
        for pair in steps.windows(2) {
            if pair[0] >= pair[1] {
                return Err(format!(
                    "rollout.steps must rise: {} then {}",
                    pair[0], pair[1]
                ));
            }
        }
        if let Some(bad) = steps.iter().find(|p| !(1..=100).contains(*p)) {
            return Err(format!(
                "rollout.steps are percentages of parents, 1 to 100, not {bad}"
            ));
        }
        let duration = |field: &str, text: Option<&str>, default: Duration| {
            let value = text
                .map(parse_duration)
                .transpose()
                .map_err(|e| format!("rollout.{field}: {e}"))?
                .unwrap_or(default);
            if value < Duration::from_secs(1) {
                return Err(format!("rollout.{field} must be at least 1s"));
            }
            Ok(value)
        };
        let ready_condition = match self.ready_condition.as_deref() {
            None => d.ready_condition,
            Some("") => None,
            Some(t) if !t.chars().all(|c| c.is_ascii_alphanumeric()) => {
                return Err(format!(
                    "rollout.readyCondition {t:?} is not a condition type (CamelCase letters and digits)"
                ));
            }
            Some(t) => Some(t.to_owned()),
        };
        Ok(RolloutSettings {
            strategy: self.strategy,
            steps,
            step_duration: duration(
                "stepDuration",
                self.step_duration.as_deref(),
                d.step_duration,
            )?,
            max_failed_reconciles: self.max_failed_reconciles.unwrap_or(0),
            ready_condition,
            progress_deadline: duration(
                "progressDeadline",
                self.progress_deadline.as_deref(),
                d.progress_deadline,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<RolloutSettings, String> {
        serde_saphyr::from_str::<RolloutEntry>(yaml)
            .map_err(|e| e.to_string())?
            .settings()
    }

    #[test]
    fn an_empty_rollout_is_an_immediate_swap_with_the_defaults() {
        let settings = parse("{}").unwrap();
        assert_eq!(settings, RolloutSettings::default());
        assert!(!settings.is_progressive());
    }

    #[test]
    fn a_canary_reads_every_field() {
        let settings = parse(
            "strategy: Canary\nsteps: [5, 25, 60]\nstepDuration: 30s\nmaxFailedReconciles: 2\nreadyCondition: Available\nprogressDeadline: 1m\n",
        )
        .unwrap();
        assert_eq!(settings.strategy, Strategy::Canary);
        assert_eq!(settings.steps, [5, 25, 60]);
        assert_eq!(settings.step_duration, Duration::from_secs(30));
        assert_eq!(settings.max_failed_reconciles, 2);
        assert_eq!(settings.ready_condition.as_deref(), Some("Available"));
        assert_eq!(settings.progress_deadline, Duration::from_secs(60));
    }

    #[test]
    fn steps_that_do_not_rise_or_leave_1_to_100_are_refused() {
        for (yaml, needle) in [
            ("steps: [50, 10]", "must rise"),
            ("steps: [10, 10]", "must rise"),
            ("steps: [0, 10]", "1 to 100"),
            ("steps: [10, 101]", "1 to 100"),
            ("steps: []", "at least one"),
            ("stepDuration: 0s", "at least 1s"),
            ("progressDeadline: soon", "invalid duration"),
            ("readyCondition: 'Ready=True'", "not a condition type"),
        ] {
            let error = parse(yaml).unwrap_err();
            assert!(error.contains(needle), "{yaml}: {error}");
        }
        assert!(parse("strategy: Sometimes").is_err());
        assert!(parse("surprise: 1").is_err());
    }

    #[test]
    fn an_empty_ready_condition_watches_no_readiness() {
        assert_eq!(parse("readyCondition: ''").unwrap().ready_condition, None);
    }
}
