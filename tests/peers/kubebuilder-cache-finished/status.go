package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The phases a Cache reports.
const (
	PhasePending     = "Pending"
	PhaseProgressing = "Progressing"
	PhaseReady       = "Ready"
	PhasePaused      = "Paused"
	PhaseDegraded    = "Degraded"
)

// The condition types.
const (
	conditionAvailable   = "Available"
	conditionProgressing = "Progressing"
	reasonSecretMissing  = "SecretMissing"
)

// rolloutPhase is the phase of a Cache that is not paused, from its
// Deployment and what the desired one asks for.
func rolloutPhase(observed *appsv1.Deployment, wanted fingerprint) string {
	switch {
	case observed == nil:
		return PhasePending
	case rolloutComplete(observed, wanted):
		return PhaseReady
	default:
		return PhaseProgressing
	}
}

// seenLatest is whether the Deployment controller has seen d's spec.
func seenLatest(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation
}

// rolloutComplete is whether d runs what wanted asks for on every replica,
// each Ready.
func rolloutComplete(d *appsv1.Deployment, wanted fingerprint) bool {
	s := d.Status
	return fingerprintOf(d) == wanted && seenLatest(d) &&
		s.Replicas == wanted.replicas && s.UpdatedReplicas == wanted.replicas &&
		s.ReadyReplicas == wanted.replicas
}

func readyReplicas(d *appsv1.Deployment) int32 {
	if d == nil {
		return 0
	}
	return d.Status.ReadyReplicas
}

// setStatus brings status up to date for phase: readyReplicas and the
// Available and Progressing conditions (meta.SetStatusCondition keeps a
// condition's transition time unless its status flips).
func setStatus(status *CacheStatus, phase string, ready, replicas int32, generation int64) {
	counts := fmt.Sprintf("%d/%d replicas ready", ready, replicas)
	available, availableReason := metav1.ConditionFalse, "NoReplicasAvailable"
	switch {
	case phase == PhasePending:
		availableReason = "DeploymentPending"
	case ready > 0:
		available, availableReason = metav1.ConditionTrue, "ReplicasAvailable"
	}
	var progressing metav1.ConditionStatus
	var progressingReason, progressingMessage string
	switch phase {
	case PhasePending:
		progressing, progressingReason, progressingMessage = metav1.ConditionTrue, "Creating", "creating the Deployment, Service and ConfigMap"
	case PhaseProgressing, PhaseDegraded:
		progressing, progressingReason, progressingMessage = metav1.ConditionTrue, "RollingOut", counts
	case PhaseReady:
		progressing, progressingReason, progressingMessage = metav1.ConditionFalse, "RolloutComplete", counts
	case PhasePaused:
		progressing, progressingReason, progressingMessage = metav1.ConditionUnknown, "Paused", "spec.paused is true: children are left as they are"
	}
	status.ReadyReplicas = ready
	status.Phase = phase
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: conditionAvailable, Status: available, Reason: availableReason,
		Message: counts, ObservedGeneration: generation,
	})
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: conditionProgressing, Status: progressing, Reason: progressingReason,
		Message: progressingMessage, ObservedGeneration: generation,
	})
}

// setSecretMissing reports a missing Secret or key: phase Pending, both
// conditions False with reason SecretMissing and message.
func setSecretMissing(status *CacheStatus, ready int32, generation int64, message string) {
	status.ReadyReplicas = ready
	status.Phase = PhasePending
	for _, t := range []string{conditionAvailable, conditionProgressing} {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: t, Status: metav1.ConditionFalse, Reason: reasonSecretMissing,
			Message: message, ObservedGeneration: generation,
		})
	}
}

func reportsSecretMissing(status *CacheStatus) bool {
	c := meta.FindStatusCondition(status.Conditions, conditionAvailable)
	return c != nil && c.Reason == reasonSecretMissing
}
