//! Upgrades: a change of `spec.image` on a Cache that has run an image to
//! completion before, rolled back to that image when Kubernetes says the
//! new one failed.
//!
//! `status.lastGoodImage` is the last image whose rollout completed with
//! every replica Ready; a Cache's first rollout sets it and is no upgrade.
//! Once it is set, a different `spec.image` is an upgrade:
//!
//! - while it rolls out, `Upgrading=True` (reason `RollingOut`, message
//!   `<old image> -> <new image>`), and the phase stays `Ready` while the
//!   ready pods, old or new, are as many as `spec.replicas`;
//! - when every replica runs it and is Ready: `Upgrading=False` and
//!   `Upgraded=True`, both reason `Upgraded`, `lastGoodImage` the new
//!   image, one Normal Event `Upgraded`;
//! - when the Deployment controller reports `Progressing=False`, reason
//!   `ProgressDeadlineExceeded` (the Deployment's `progressDeadlineSeconds`
//!   is `spec.upgrade.timeoutSeconds`, so the control plane, not a timer in
//!   the guest, decides that the rollout failed): the Deployment is set
//!   back to `lastGoodImage` (`spec.image`, the user's, is left as it is),
//!   `status.failedImage` records the image, `Upgrading=False` and
//!   `Upgraded=False` with reason `RolledBack` and a message naming it, a
//!   Warning Event `UpgradeRolledBack`, phase `Degraded`.
//!
//! While `spec.image` is `status.failedImage` the Deployment keeps
//! `lastGoodImage` and nothing is tried again; any other `spec.image`
//! clears `failedImage` and starts a new upgrade (or, when it is
//! `lastGoodImage` itself, ends the matter). A paused Cache never gets here.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use wasmop_guest::Event;
use wasmop_guest::condition::{ConditionStatus, is_condition_true, set_condition};

use crate::api::{CacheStatus, Phase};
use crate::observed::{Fingerprint, ObservedDeployment};

/// Condition type: a new `spec.image` is rolling out.
pub const UPGRADING: &str = "Upgrading";
/// Condition type: how the last upgrade ended. Also the reason of both
/// conditions and the Event of an upgrade that completed.
pub const UPGRADED: &str = "Upgraded";
/// Reason of `Upgrading=True`.
pub const ROLLING_OUT: &str = "RollingOut";
/// Reason of `Upgrading=False` and `Upgraded=False` after a rollback.
pub const ROLLED_BACK: &str = "RolledBack";
/// Reason of `Upgrading=False` when `spec.image` went back to
/// `lastGoodImage` while an upgrade was rolling out.
pub const CANCELLED: &str = "Cancelled";
/// The Warning Event of a rollback.
pub const UPGRADE_ROLLED_BACK: &str = "UpgradeRolledBack";

/// Where a Cache's image stands, decided from `spec.image`, the status the
/// Cache shows and its observed Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upgrade {
    /// No upgrade: `spec.image` is `lastGoodImage`, or no image has
    /// completed a rollout yet.
    None,
    /// `spec.image` (`to`) is rolling out over `from`, the last good image.
    RollingOut {
        /// `lastGoodImage`.
        from: String,
        /// `spec.image`.
        to: String,
    },
    /// The rollout of `to` has just completed on every replica.
    Completed {
        /// The last good image until now.
        from: String,
        /// `spec.image`, the last good image from now on.
        to: String,
    },
    /// The rollout of `failed` has just exceeded its deadline: the
    /// Deployment goes back to `to`.
    RollBack {
        /// `spec.image`.
        failed: String,
        /// `lastGoodImage`.
        to: String,
    },
    /// `spec.image` is the image that failed before: the Deployment stays
    /// at `to`.
    HeldBack {
        /// `lastGoodImage`.
        to: String,
    },
}

impl Upgrade {
    /// Decides where `image` (`spec.image`) stands, given the Cache's
    /// `status` and its `observed` Deployment; `wanted` is what the
    /// Deployment asks for when it runs `image`.
    pub fn decide(
        image: &str,
        status: Option<&CacheStatus>,
        observed: Option<&ObservedDeployment>,
        wanted: &Fingerprint<'_>,
    ) -> Self {
        let Some(good) = status.and_then(|s| s.last_good_image.as_deref()) else {
            return Self::None;
        };
        if image == good {
            return Self::None;
        }
        if let Some(to) = held_image(image, status) {
            return Self::HeldBack { to: to.to_owned() };
        }
        let (from, to) = (good.to_owned(), image.to_owned());
        match observed {
            Some(d) if d.rollout_complete(wanted) => Self::Completed { from, to },
            Some(d) if d.fingerprint().image == Some(image) && d.progress_deadline_exceeded() => {
                Self::RollBack {
                    failed: to,
                    to: from,
                }
            }
            _ => Self::RollingOut { from, to },
        }
    }

    /// The image the Deployment is to run instead of `spec.image`: the last
    /// good one after a rollback; `None` for `spec.image` itself.
    pub fn held_at(&self) -> Option<&str> {
        match self {
            Self::RollBack { to, .. } | Self::HeldBack { to } => Some(to),
            Self::None | Self::RollingOut { .. } | Self::Completed { .. } => None,
        }
    }

    /// The phase to report, given `rollout`, the Deployment's own phase
    /// ([`crate::status::phase`]), its `ready` pods and the `replicas` the
    /// spec asks for.
    pub fn phase(&self, rollout: Phase, ready: i32, replicas: i32) -> Phase {
        match self {
            Self::RollingOut { .. } if ready >= replicas => Phase::Ready,
            Self::RollBack { .. } | Self::HeldBack { .. } => Phase::Degraded,
            _ => rollout,
        }
    }

    /// Brings the upgrade's part of `status` up to date: `lastGoodImage`,
    /// `failedImage`, `Upgrading` and `Upgraded` (at `generation`, `now`
    /// when one flips). `image` is `spec.image`, `rollout` the Deployment's
    /// phase, `timeout` `spec.upgrade.timeoutSeconds`. Returns the Event of
    /// an upgrade that ended in this reconcile.
    pub fn report(
        &self,
        status: &mut CacheStatus,
        image: &str,
        rollout: Phase,
        generation: Option<i64>,
        timeout: i32,
        now: &Time,
    ) -> Option<Event> {
        let was_upgrading = is_condition_true(&status.conditions, UPGRADING);
        let mut set = |type_: &str, state: bool, reason: &str, message: &str| {
            set_condition(
                &mut status.conditions,
                type_,
                ConditionStatus::from(state),
                reason,
                message,
                generation,
                now,
            );
        };
        match self {
            Self::None => {
                if rollout == Phase::Ready && status.last_good_image.is_none() {
                    status.last_good_image = Some(image.to_owned());
                }
                if status.last_good_image.as_deref() == Some(image) {
                    status.failed_image = None;
                }
                if was_upgrading {
                    set(
                        UPGRADING,
                        false,
                        CANCELLED,
                        &format!("spec.image is {image} again"),
                    );
                }
                None
            }
            Self::RollingOut { from, to } => {
                status.failed_image = None;
                set(UPGRADING, true, ROLLING_OUT, &format!("{from} -> {to}"));
                None
            }
            Self::Completed { from, to } => {
                let message = format!("{from} -> {to}");
                status.failed_image = None;
                status.last_good_image = Some(to.clone());
                set(UPGRADING, false, UPGRADED, &message);
                set(UPGRADED, true, UPGRADED, &message);
                Some(Event::normal(
                    UPGRADED,
                    format!("upgraded from {from} to {to}: every replica is Ready"),
                ))
            }
            Self::RollBack { failed, to } => {
                let message = format!(
                    "the rollout of {failed} made no progress for {timeout} s (ProgressDeadlineExceeded); rolled back to {to}"
                );
                status.failed_image = Some(failed.clone());
                set(UPGRADING, false, ROLLED_BACK, &message);
                set(UPGRADED, false, ROLLED_BACK, &message);
                Some(Event::warning(UPGRADE_ROLLED_BACK, message))
            }
            Self::HeldBack { .. } => None,
        }
    }
}

/// The image the Deployment keeps while `image` (`spec.image`) is the one
/// `status` says failed: the last good one. `None` otherwise.
pub fn held_image<'a>(image: &str, status: Option<&'a CacheStatus>) -> Option<&'a str> {
    let status = status?;
    if status.failed_image.as_deref() == Some(image) {
        status.last_good_image.as_deref()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::time::{Duration, UNIX_EPOCH};
    use wasmop_guest::EventType;
    use wasmop_guest::condition::find_condition;
    use wasmop_guest::time::time_at;

    fn at(seconds: u64) -> Time {
        time_at(UNIX_EPOCH + Duration::from_secs(seconds))
    }

    fn wanted(image: &str) -> Fingerprint<'_> {
        Fingerprint {
            replicas: Some(1),
            image: Some(image),
            port: Some(6379),
            config_hash: Some("abc"),
            secret_hash: None,
        }
    }

    /// A Deployment of one replica running `image`, `ready` or not, with
    /// the Progressing condition's `reason`.
    fn deployment(image: &str, ready: bool, reason: &str) -> ObservedDeployment {
        let object: Value = json!({
            "metadata": {"generation": 2},
            "spec": {"replicas": 1, "template": {
                "metadata": {"annotations": {"apps.example.com/config-hash": "abc"}},
                "spec": {"containers": [{"name": "cache", "image": image,
                    "ports": [{"containerPort": 6379}]}]}}},
            "status": {"observedGeneration": 2, "replicas": if ready { 1 } else { 2 },
                "updatedReplicas": 1, "readyReplicas": 1,
                "conditions": [{"type": "Progressing",
                    "status": if reason == "ProgressDeadlineExceeded" { "False" } else { "True" },
                    "reason": reason}]}
        });
        serde_json::from_value(object).unwrap()
    }

    fn status(good: Option<&str>, failed: Option<&str>) -> CacheStatus {
        CacheStatus {
            last_good_image: good.map(str::to_owned),
            failed_image: failed.map(str::to_owned),
            ..CacheStatus::default()
        }
    }

    #[test]
    fn a_first_rollout_is_no_upgrade_and_its_image_becomes_the_last_good_one() {
        let running = deployment("redis:7.2", true, "NewReplicaSetAvailable");
        let upgrade = Upgrade::decide(
            "redis:7.2",
            Some(&status(None, None)),
            Some(&running),
            &wanted("redis:7.2"),
        );
        assert_eq!(upgrade, Upgrade::None);
        let mut s = status(None, None);
        let event = upgrade.report(
            &mut s,
            "redis:7.2",
            Phase::Progressing,
            Some(1),
            300,
            &at(1),
        );
        assert_eq!((s.last_good_image.as_deref(), event), (None, None));
        upgrade.report(&mut s, "redis:7.2", Phase::Ready, Some(1), 300, &at(2));
        assert_eq!(s.last_good_image.as_deref(), Some("redis:7.2"));
        assert!(s.conditions.is_empty(), "{:?}", s.conditions);
    }

    #[test]
    fn a_new_image_rolls_out_ready_while_old_pods_serve_then_completes_once() {
        let old = deployment("redis:7.2", true, "NewReplicaSetAvailable");
        let mut s = status(Some("redis:7.2"), None);
        let rolling = Upgrade::decide("redis:7.4", Some(&s), Some(&old), &wanted("redis:7.4"));
        assert_eq!(
            rolling,
            Upgrade::RollingOut {
                from: "redis:7.2".into(),
                to: "redis:7.4".into()
            }
        );
        assert_eq!(rolling.held_at(), None);
        assert_eq!(rolling.phase(Phase::Progressing, 1, 1), Phase::Ready);
        assert_eq!(rolling.phase(Phase::Progressing, 2, 1), Phase::Ready);
        assert_eq!(rolling.phase(Phase::Progressing, 2, 3), Phase::Progressing);
        assert_eq!(rolling.phase(Phase::Pending, 0, 1), Phase::Pending);
        assert_eq!(
            rolling.report(
                &mut s,
                "redis:7.4",
                Phase::Progressing,
                Some(2),
                300,
                &at(10)
            ),
            None
        );
        let upgrading = find_condition(&s.conditions, UPGRADING).unwrap();
        assert_eq!(
            (upgrading.status.as_str(), upgrading.reason.as_str()),
            ("True", ROLLING_OUT)
        );
        assert_eq!(upgrading.message, "redis:7.2 -> redis:7.4");

        let new = deployment("redis:7.4", true, "NewReplicaSetAvailable");
        let done = Upgrade::decide("redis:7.4", Some(&s), Some(&new), &wanted("redis:7.4"));
        assert!(matches!(done, Upgrade::Completed { .. }));
        let event = done
            .report(&mut s, "redis:7.4", Phase::Ready, Some(2), 300, &at(20))
            .unwrap();
        assert_eq!(
            (event.event_type, event.reason.as_str()),
            (EventType::Normal, UPGRADED)
        );
        assert_eq!(s.last_good_image.as_deref(), Some("redis:7.4"));
        for type_ in [UPGRADING, UPGRADED] {
            let c = find_condition(&s.conditions, type_).unwrap();
            assert_eq!(c.reason, UPGRADED, "{type_}");
            assert_eq!(c.message, "redis:7.2 -> redis:7.4", "{type_}");
        }
        assert_eq!(
            find_condition(&s.conditions, UPGRADING).unwrap().status,
            "False"
        );
        assert_eq!(
            find_condition(&s.conditions, UPGRADED).unwrap().status,
            "True"
        );

        // The next reconcile finds nothing to upgrade and changes nothing.
        let after = s.clone();
        let next = Upgrade::decide("redis:7.4", Some(&s), Some(&new), &wanted("redis:7.4"));
        assert_eq!(next, Upgrade::None);
        assert_eq!(
            next.report(&mut s, "redis:7.4", Phase::Ready, Some(2), 300, &at(30)),
            None
        );
        assert_eq!(s, after);
    }

    #[test]
    fn a_rollout_past_its_deadline_is_rolled_back_and_held_back_after() {
        let stuck = deployment("redis:7.4-never-ready", false, "ProgressDeadlineExceeded");
        let mut s = status(Some("redis:7.2"), None);
        let image = "redis:7.4-never-ready";
        let back = Upgrade::decide(image, Some(&s), Some(&stuck), &wanted(image));
        assert_eq!(back.held_at(), Some("redis:7.2"));
        assert_eq!(back.phase(Phase::Progressing, 1, 1), Phase::Degraded);
        let event = back
            .report(&mut s, image, Phase::Progressing, Some(2), 30, &at(40))
            .unwrap();
        assert_eq!(
            (event.event_type, event.reason.as_str()),
            (EventType::Warning, UPGRADE_ROLLED_BACK)
        );
        assert!(event.message.contains(image), "{}", event.message);
        assert_eq!(s.failed_image.as_deref(), Some(image));
        assert_eq!(s.last_good_image.as_deref(), Some("redis:7.2"));
        for type_ in [UPGRADING, UPGRADED] {
            let c = find_condition(&s.conditions, type_).unwrap();
            assert_eq!(
                (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
                ("False", ROLLED_BACK, event.message.as_str()),
                "{type_}"
            );
        }

        // Rolled back, or not yet: the image that failed is not tried again.
        let after = s.clone();
        for observed in [
            deployment("redis:7.2", true, "NewReplicaSetAvailable"),
            deployment("redis:7.2", false, "ProgressDeadlineExceeded"),
            stuck,
        ] {
            let held = Upgrade::decide(image, Some(&s), Some(&observed), &wanted(image));
            assert_eq!(
                held,
                Upgrade::HeldBack {
                    to: "redis:7.2".into()
                }
            );
            assert_eq!(held.phase(Phase::Ready, 1, 1), Phase::Degraded);
            assert_eq!(
                held.report(&mut s, image, Phase::Ready, Some(2), 30, &at(50)),
                None
            );
            assert_eq!(s, after);
        }
    }

    #[test]
    fn a_deadline_about_the_old_image_is_no_verdict_on_the_new_one() {
        let old = deployment("redis:7.2", true, "ProgressDeadlineExceeded");
        let s = status(Some("redis:7.2"), None);
        assert!(matches!(
            Upgrade::decide("redis:7.4", Some(&s), Some(&old), &wanted("redis:7.4")),
            Upgrade::RollingOut { .. }
        ));
    }

    #[test]
    fn a_new_image_after_a_rollback_starts_a_new_upgrade() {
        let mut s = status(Some("redis:7.2"), Some("redis:7.4-never-ready"));
        let old = deployment("redis:7.2", true, "NewReplicaSetAvailable");
        let again = Upgrade::decide("redis:7.4", Some(&s), Some(&old), &wanted("redis:7.4"));
        assert!(matches!(again, Upgrade::RollingOut { .. }));
        again.report(
            &mut s,
            "redis:7.4",
            Phase::Progressing,
            Some(3),
            300,
            &at(60),
        );
        assert_eq!(s.failed_image, None);
        assert_eq!(
            find_condition(&s.conditions, UPGRADING).unwrap().status,
            "True"
        );
    }

    #[test]
    fn going_back_to_the_last_good_image_ends_an_upgrade_or_a_rollback() {
        let old = deployment("redis:7.2", false, "ReplicaSetUpdated");
        let mut s = status(Some("redis:7.2"), None);
        Upgrade::decide("redis:7.4", Some(&s), Some(&old), &wanted("redis:7.4")).report(
            &mut s,
            "redis:7.4",
            Phase::Progressing,
            Some(2),
            300,
            &at(10),
        );
        let back = Upgrade::decide("redis:7.2", Some(&s), Some(&old), &wanted("redis:7.2"));
        assert_eq!(back, Upgrade::None);
        back.report(
            &mut s,
            "redis:7.2",
            Phase::Progressing,
            Some(3),
            300,
            &at(20),
        );
        let upgrading = find_condition(&s.conditions, UPGRADING).unwrap();
        assert_eq!(
            (upgrading.status.as_str(), upgrading.reason.as_str()),
            ("False", CANCELLED)
        );

        let mut failed = status(Some("redis:7.2"), Some("redis:7.4-never-ready"));
        Upgrade::None.report(
            &mut failed,
            "redis:7.2",
            Phase::Ready,
            Some(3),
            300,
            &at(30),
        );
        assert_eq!(failed.failed_image, None);
        assert_eq!(held_image("redis:7.4-never-ready", Some(&failed)), None);
    }
}
