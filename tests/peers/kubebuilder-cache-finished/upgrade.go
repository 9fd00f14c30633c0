package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Stage 4's upgrade and rollback: a change of spec.image after a first
// complete rollout rolls out with Upgrading=True; when every replica runs
// it, Upgraded=True and lastGoodImage moves; when the Deployment
// controller reports ProgressDeadlineExceeded (its progressDeadlineSeconds
// is spec.upgrade.timeoutSeconds), the Deployment goes back to
// lastGoodImage, failedImage records the image and the phase is Degraded.
const (
	conditionUpgrading = "Upgrading"
	conditionUpgraded  = "Upgraded"
	reasonRollingOut   = "RollingOut"
	reasonRolledBack   = "RolledBack"
	reasonCancelled    = "Cancelled"
)

type upgradeKind int

const (
	upgradeNone upgradeKind = iota
	upgradeRollingOut
	upgradeCompleted
	upgradeRollBack
	upgradeHeldBack
)

// upgrade is where spec.image stands: from is the last good image, to the
// image the Deployment is to run.
type upgrade struct {
	kind     upgradeKind
	from, to string
}

func decideUpgrade(image string, status *CacheStatus, observed *appsv1.Deployment, wanted fingerprint) upgrade {
	good := status.LastGoodImage
	if good == "" || image == good {
		return upgrade{kind: upgradeNone}
	}
	if status.FailedImage == image {
		return upgrade{kind: upgradeHeldBack, to: good}
	}
	switch {
	case observed != nil && rolloutComplete(observed, wanted):
		return upgrade{kind: upgradeCompleted, from: good, to: image}
	case observed != nil && fingerprintOf(observed).image == image && progressDeadlineExceeded(observed):
		return upgrade{kind: upgradeRollBack, from: image, to: good}
	default:
		return upgrade{kind: upgradeRollingOut, from: good, to: image}
	}
}

func progressDeadlineExceeded(d *appsv1.Deployment) bool {
	if !seenLatest(d) {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == "False" && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

// heldAt is the image the Deployment runs instead of spec.image; empty for
// spec.image itself.
func (u upgrade) heldAt() string {
	if u.kind == upgradeRollBack || u.kind == upgradeHeldBack {
		return u.to
	}
	return ""
}

func (u upgrade) phase(rollout string, ready, replicas int32) string {
	switch {
	case u.kind == upgradeRollingOut && ready >= replicas:
		return PhaseReady
	case u.kind == upgradeRollBack || u.kind == upgradeHeldBack:
		return PhaseDegraded
	}
	return rollout
}

// report brings the upgrade's part of status up to date; the Event of an
// upgrade that ended in this reconcile.
func (u upgrade) report(status *CacheStatus, image, rollout string, generation int64, timeout int32) *event {
	wasUpgrading := meta.IsStatusConditionTrue(status.Conditions, conditionUpgrading)
	set := func(t string, s metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: message, ObservedGeneration: generation,
		})
	}
	switch u.kind {
	case upgradeNone:
		if rollout == PhaseReady && status.LastGoodImage == "" {
			status.LastGoodImage = image
		}
		if status.LastGoodImage == image {
			status.FailedImage = ""
		}
		if wasUpgrading {
			set(conditionUpgrading, metav1.ConditionFalse, reasonCancelled, fmt.Sprintf("spec.image is %s again", image))
		}
	case upgradeRollingOut:
		status.FailedImage = ""
		set(conditionUpgrading, metav1.ConditionTrue, reasonRollingOut, fmt.Sprintf("%s -> %s", u.from, u.to))
	case upgradeCompleted:
		message := fmt.Sprintf("%s -> %s", u.from, u.to)
		status.FailedImage = ""
		status.LastGoodImage = u.to
		set(conditionUpgrading, metav1.ConditionFalse, conditionUpgraded, message)
		set(conditionUpgraded, metav1.ConditionTrue, conditionUpgraded, message)
		e := normal(conditionUpgraded, fmt.Sprintf("upgraded from %s to %s: every replica is Ready", u.from, u.to))
		return &e
	case upgradeRollBack:
		message := fmt.Sprintf("the rollout of %s made no progress for %d s (ProgressDeadlineExceeded); rolled back to %s", u.from, timeout, u.to)
		status.FailedImage = u.from
		set(conditionUpgrading, metav1.ConditionFalse, reasonRolledBack, message)
		set(conditionUpgraded, metav1.ConditionFalse, reasonRolledBack, message)
		e := warning("UpgradeRolledBack", message)
		return &e
	}
	return nil
}
