package cacheoperator

import (
	"fmt"

	"example.com/cache-operator/api/v1alpha1"
	"example.com/cache-operator/k8s/appsv1"
	wasmop "wasmop.dev/sdk"
)

// upgradeKind is where spec.image stands against status.lastGoodImage.
type upgradeKind int

const (
	// noUpgrade: spec.image is the last good image, or none is known yet.
	noUpgrade upgradeKind = iota
	// rollingOut: the new image is rolling out.
	rollingOut
	// completed: every replica runs the new image, Ready.
	completed
	// rollBack: the new image made no progress within its deadline.
	rollBack
	// heldBack: spec.image is the image that was rolled back.
	heldBack
)

// upgrade is the Rust guest's upgrade::Upgrade: from and to are the images.
type upgrade struct {
	kind     upgradeKind
	from, to string
}

// heldAt is the image the Deployment runs instead of spec.image after a
// rollback, or "".
func (u upgrade) heldAt() string {
	if u.kind == rollBack || u.kind == heldBack {
		return u.to
	}
	return ""
}

// phase is the phase to report over the Deployment's own rollout phase.
func (u upgrade) phase(rollout string, ready, replicas int32) string {
	switch {
	case u.kind == rollingOut && ready >= replicas:
		return PhaseReady
	case u.kind == rollBack || u.kind == heldBack:
		return PhaseDegraded
	}
	return rollout
}

// heldImage is the last good image while image is the one that failed.
func heldImage(image string, status *v1alpha1.CacheStatus) string {
	if status != nil && status.FailedImage != "" && status.FailedImage == image {
		return status.LastGoodImage
	}
	return ""
}

// decideUpgrade says where image (spec.image) stands; wanted is the
// Deployment running it.
func decideUpgrade(image string, status *v1alpha1.CacheStatus, observed *appsv1.Deployment, wanted fingerprint) upgrade {
	if status == nil || status.LastGoodImage == "" || image == status.LastGoodImage {
		return upgrade{kind: noUpgrade}
	}
	good := status.LastGoodImage
	if held := heldImage(image, status); held != "" {
		return upgrade{kind: heldBack, to: held}
	}
	if observed != nil && rolloutComplete(observed, wanted) {
		return upgrade{kind: completed, from: good, to: image}
	}
	if observed != nil && observedFingerprint(observed).image == image && progressDeadlineExceeded(observed) {
		return upgrade{kind: rollBack, from: image, to: good}
	}
	return upgrade{kind: rollingOut, from: good, to: image}
}

// reportUpgrade brings lastGoodImage, failedImage, Upgrading and Upgraded
// of status up to date, and returns the Event of an upgrade that ended now.
func reportUpgrade(u upgrade, status *v1alpha1.CacheStatus, image, rollout string, generation int64, timeout int32, now string) *event {
	set := func(conditionType string, holds bool, reason, message string) {
		wasmop.SetStatusCondition(&status.Conditions, wasmop.Condition{
			Type: conditionType, Status: wasmop.ConditionOf(holds), Reason: reason, Message: message, ObservedGeneration: generation,
		}, now)
	}
	switch u.kind {
	case noUpgrade:
		if rollout == PhaseReady && status.LastGoodImage == "" {
			status.LastGoodImage = image
		}
		if status.LastGoodImage == image {
			status.FailedImage = ""
		}
		if wasmop.IsStatusConditionTrue(status.Conditions, "Upgrading") {
			set("Upgrading", false, "Cancelled", "spec.image is "+image+" again")
		}
	case rollingOut:
		status.FailedImage = ""
		set("Upgrading", true, "RollingOut", u.from+" -> "+u.to)
	case completed:
		message := u.from + " -> " + u.to
		status.FailedImage = ""
		status.LastGoodImage = u.to
		set("Upgrading", false, "Upgraded", message)
		set("Upgraded", true, "Upgraded", message)
		e := normal("Upgraded", fmt.Sprintf("upgraded from %s to %s: every replica is Ready", u.from, u.to))
		return &e
	case rollBack:
		message := fmt.Sprintf("the rollout of %s made no progress for %d s (%s); rolled back to %s", u.from, timeout, ProgressDeadlineExceeded, u.to)
		status.FailedImage = u.from
		set("Upgrading", false, "RolledBack", message)
		set("Upgraded", false, "RolledBack", message)
		e := warning("UpgradeRolledBack", message)
		return &e
	}
	return nil
}
