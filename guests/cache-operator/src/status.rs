//! The status a Cache reports: ready replicas, phase and the `Available` and
//! `Progressing` conditions, computed from the observed Deployment (the
//! upgrade's part, `crate::upgrade`, is laid over it).
//!
//! The status is a pure function of the parent and the observed Deployment;
//! conditions keep their transition times unless their status flips, so a
//! converged Cache yields exactly the status it already has.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use wasmop_guest::condition::{ConditionStatus, set_condition};

use crate::api::{CacheStatus, Phase};
use crate::observed::{Fingerprint, ObservedDeployment};

/// Condition type: at least one replica is ready.
pub const AVAILABLE: &str = "Available";
/// Condition type: a rollout is under way.
pub const PROGRESSING: &str = "Progressing";

/// The phase of a Cache that is not paused, from its observed Deployment
/// and what the desired one asks for.
pub fn phase(observed: Option<&ObservedDeployment>, desired: &Fingerprint<'_>) -> Phase {
    match observed {
        None => Phase::Pending,
        Some(observed) if observed.rollout_complete(desired) => Phase::Ready,
        Some(_) => Phase::Progressing,
    }
}

/// The status to report: `previous` (the parent's current status, whose
/// conditions and their transition times are kept, as are its
/// `lastGoodImage` and `failedImage`) brought up to date for `phase`, the
/// Deployment's state ([`phase`]) or `Paused`. `Degraded` is laid over a
/// rollout's phase by `crate::upgrade`; given here, it reads as a rollout
/// under way.
pub fn status(
    previous: Option<&CacheStatus>,
    phase: Phase,
    ready: i32,
    replicas: i32,
    generation: Option<i64>,
    now: &Time,
) -> CacheStatus {
    let mut conditions = previous.map(|s| s.conditions.clone()).unwrap_or_default();
    let counts = format!("{ready}/{replicas} replicas ready");
    let (available, available_reason) = match phase {
        Phase::Pending => (ConditionStatus::False, "DeploymentPending"),
        _ if ready > 0 => (ConditionStatus::True, "ReplicasAvailable"),
        _ => (ConditionStatus::False, "NoReplicasAvailable"),
    };
    let (progressing, progressing_reason, progressing_message) = match phase {
        Phase::Pending => (
            ConditionStatus::True,
            "Creating",
            "creating the Deployment, Service and ConfigMap".to_owned(),
        ),
        Phase::Progressing | Phase::Degraded => {
            (ConditionStatus::True, "RollingOut", counts.clone())
        }
        Phase::Ready => (ConditionStatus::False, "RolloutComplete", counts.clone()),
        Phase::Paused => (
            ConditionStatus::Unknown,
            "Paused",
            "spec.paused is true: children are left as they are".to_owned(),
        ),
    };
    set_condition(
        &mut conditions,
        AVAILABLE,
        available,
        available_reason,
        &counts,
        generation,
        now,
    );
    set_condition(
        &mut conditions,
        PROGRESSING,
        progressing,
        progressing_reason,
        &progressing_message,
        generation,
        now,
    );
    CacheStatus {
        ready_replicas: ready,
        phase: Some(phase.as_str().to_owned()),
        observed_generation: None,
        last_good_image: previous.and_then(|s| s.last_good_image.clone()),
        failed_image: previous.and_then(|s| s.failed_image.clone()),
        conditions,
    }
}

/// Condition reason: the Secret or key `spec.auth.secretRef` names is
/// missing.
pub const SECRET_MISSING: &str = "SecretMissing";

/// The status of a Cache whose Secret or key is missing: phase `Pending`,
/// `Available=False` and `Progressing=False`, both with reason
/// [`SECRET_MISSING`] and `message` (which names the Secret and the key).
pub fn secret_missing(
    previous: Option<&CacheStatus>,
    ready: i32,
    generation: Option<i64>,
    message: &str,
    now: &Time,
) -> CacheStatus {
    let mut conditions = previous.map(|s| s.conditions.clone()).unwrap_or_default();
    for kind in [AVAILABLE, PROGRESSING] {
        set_condition(
            &mut conditions,
            kind,
            ConditionStatus::False,
            SECRET_MISSING,
            message,
            generation,
            now,
        );
    }
    CacheStatus {
        ready_replicas: ready,
        phase: Some(Phase::Pending.as_str().to_owned()),
        observed_generation: None,
        last_good_image: previous.and_then(|s| s.last_good_image.clone()),
        failed_image: previous.and_then(|s| s.failed_image.clone()),
        conditions,
    }
}

/// True when `status` already reports [`SECRET_MISSING`] on `Available`.
pub fn reports_secret_missing(status: Option<&CacheStatus>) -> bool {
    status
        .and_then(|s| wasmop_guest::condition::find_condition(&s.conditions, AVAILABLE))
        .is_some_and(|c| c.reason == SECRET_MISSING)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::{Duration, UNIX_EPOCH};
    use wasmop_guest::condition::find_condition;
    use wasmop_guest::time::time_at;

    const DESIRED: Fingerprint<'static> = Fingerprint {
        replicas: Some(2),
        image: Some("redis:7.2"),
        port: Some(6379),
        config_hash: Some("abc"),
        secret_hash: None,
    };

    fn at(seconds: u64) -> Time {
        time_at(UNIX_EPOCH + Duration::from_secs(seconds))
    }

    fn deployment(ready: i64) -> serde_json::Value {
        json!({
            "metadata": {"generation": 1},
            "spec": {
                "replicas": 2,
                "template": {
                    "metadata": {"annotations": {"apps.example.com/config-hash": "abc"}},
                    "spec": {"containers": [{"name": "cache", "image": "redis:7.2", "ports": [{"containerPort": 6379}]}]}
                }
            },
            "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": ready}
        })
    }

    #[test]
    fn no_deployment_is_pending() {
        assert_eq!(phase(None, &DESIRED), Phase::Pending);
    }

    #[test]
    fn all_replicas_ready_and_updated_is_ready() {
        let d = deployment(2);
        assert_eq!(
            phase(Some(&serde_json::from_value(d).unwrap()), &DESIRED),
            Phase::Ready
        );
    }

    #[test]
    fn partly_ready_is_progressing() {
        let d = deployment(1);
        assert_eq!(
            phase(Some(&serde_json::from_value(d).unwrap()), &DESIRED),
            Phase::Progressing
        );
    }

    #[test]
    fn ready_status_has_available_true_and_progressing_false() {
        let s = status(None, Phase::Ready, 2, 2, Some(3), &at(10));
        assert_eq!(s.ready_replicas, 2);
        assert_eq!(s.phase.as_deref(), Some("Ready"));
        let available = find_condition(&s.conditions, AVAILABLE).unwrap();
        assert_eq!(available.status, "True");
        assert_eq!(available.message, "2/2 replicas ready");
        assert_eq!(available.observed_generation, Some(3));
        let progressing = find_condition(&s.conditions, PROGRESSING).unwrap();
        assert_eq!(progressing.status, "False");
        assert_eq!(progressing.reason, "RolloutComplete");
    }

    #[test]
    fn pending_status_is_not_available() {
        let s = status(None, Phase::Pending, 0, 2, Some(1), &at(10));
        assert_eq!(
            find_condition(&s.conditions, AVAILABLE).unwrap().status,
            "False"
        );
        assert_eq!(
            find_condition(&s.conditions, PROGRESSING).unwrap().status,
            "True"
        );
    }

    #[test]
    fn progressing_without_ready_pods_is_not_available() {
        let s = status(None, Phase::Progressing, 0, 2, Some(1), &at(10));
        let available = find_condition(&s.conditions, AVAILABLE).unwrap();
        assert_eq!(available.status, "False");
        assert_eq!(available.reason, "NoReplicasAvailable");
    }

    #[test]
    fn paused_status_has_progressing_unknown() {
        let s = status(None, Phase::Paused, 1, 2, Some(1), &at(10));
        assert_eq!(s.phase.as_deref(), Some("Paused"));
        assert_eq!(
            find_condition(&s.conditions, PROGRESSING).unwrap().status,
            "Unknown"
        );
        assert_eq!(
            find_condition(&s.conditions, AVAILABLE).unwrap().status,
            "True"
        );
    }

    #[test]
    fn a_missing_secret_is_pending_and_not_available_with_the_message() {
        let ready = status(None, Phase::Ready, 2, 2, Some(3), &at(10));
        let s = secret_missing(
            Some(&ready),
            2,
            Some(4),
            "Secret creds has no key password",
            &at(20),
        );
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        let available = find_condition(&s.conditions, AVAILABLE).unwrap();
        assert_eq!(
            (
                available.status.as_str(),
                available.reason.as_str(),
                available.message.as_str()
            ),
            ("False", SECRET_MISSING, "Secret creds has no key password")
        );
        assert_eq!(available.last_transition_time, at(20));
        assert!(reports_secret_missing(Some(&s)));
        assert!(!reports_secret_missing(Some(&ready)));
        let again = secret_missing(
            Some(&s),
            2,
            Some(4),
            "Secret creds has no key password",
            &at(30),
        );
        assert_eq!(again, s);
    }

    #[test]
    fn recomputing_a_converged_status_keeps_it_identical() {
        let first = status(None, Phase::Ready, 2, 2, Some(3), &at(10));
        let again = status(Some(&first), Phase::Ready, 2, 2, Some(3), &at(99));
        assert_eq!(first, again);
    }

    #[test]
    fn a_flipped_condition_gets_a_new_transition_time_and_the_other_keeps_its_own() {
        let progressing = status(None, Phase::Progressing, 1, 2, Some(3), &at(10));
        let ready = status(Some(&progressing), Phase::Ready, 2, 2, Some(3), &at(20));
        assert_eq!(
            find_condition(&ready.conditions, PROGRESSING)
                .unwrap()
                .last_transition_time,
            at(20)
        );
        assert_eq!(
            find_condition(&ready.conditions, AVAILABLE)
                .unwrap()
                .last_transition_time,
            at(10)
        );
    }

    #[test]
    fn the_images_an_upgrade_remembers_survive_every_status() {
        let mut previous = status(None, Phase::Ready, 2, 2, Some(3), &at(10));
        previous.last_good_image = Some("redis:7.2".into());
        previous.failed_image = Some("redis:7.4-never-ready".into());
        for next in [
            status(Some(&previous), Phase::Progressing, 1, 2, Some(4), &at(20)),
            status(Some(&previous), Phase::Paused, 2, 2, Some(4), &at(20)),
            secret_missing(Some(&previous), 2, Some(4), "no Secret", &at(20)),
        ] {
            assert_eq!(next.last_good_image, previous.last_good_image);
            assert_eq!(next.failed_image, previous.failed_image);
        }
    }

    #[test]
    fn conditions_set_by_others_are_kept() {
        let mut previous = status(None, Phase::Ready, 2, 2, Some(3), &at(10));
        previous.conditions.insert(
            0,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "Custom".into(),
                status: "True".into(),
                reason: "Other".into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: at(1),
            },
        );
        let again = status(Some(&previous), Phase::Ready, 2, 2, Some(3), &at(99));
        assert_eq!(again, previous);
    }
}
