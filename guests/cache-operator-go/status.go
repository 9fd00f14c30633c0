package cacheoperator

import (
	"fmt"

	"example.com/cache-operator/api/v1alpha1"
	"example.com/cache-operator/k8s/appsv1"
	wasmop "wasmop.dev/sdk"
)

// The phases a Cache reports.
const (
	PhasePending     = "Pending"
	PhaseProgressing = "Progressing"
	PhaseReady       = "Ready"
	PhaseDegraded    = "Degraded"
	PhasePaused      = "Paused"
)

// ProgressDeadlineExceeded is the reason the Deployment controller gives
// a rollout past its deadline.
const ProgressDeadlineExceeded = "ProgressDeadlineExceeded"

func readyReplicas(d *appsv1.Deployment) int32 {
	if d == nil || d.Status == nil || d.Status.ReadyReplicas == nil {
		return 0
	}
	return *d.Status.ReadyReplicas
}

// seenLatest says whether the Deployment's controller has seen its
// latest generation.
func seenLatest(d *appsv1.Deployment) bool {
	if d.ObjectMeta.Generation == 0 {
		return true
	}
	return d.Status != nil && d.Status.ObservedGeneration != nil && *d.Status.ObservedGeneration >= d.ObjectMeta.Generation
}

func count(n *int32) int64 {
	if n == nil {
		return 0
	}
	return int64(*n)
}

// rolloutComplete says whether every replica runs what wanted asks for.
func rolloutComplete(d *appsv1.Deployment, wanted fingerprint) bool {
	if d.Status == nil || observedFingerprint(d) != wanted || !seenLatest(d) {
		return false
	}
	return count(d.Status.Replicas) == wanted.replicas &&
		count(d.Status.UpdatedReplicas) == wanted.replicas &&
		count(d.Status.ReadyReplicas) == wanted.replicas
}

// progressDeadlineExceeded says whether the Deployment's controller,
// having seen its latest spec, says the rollout failed.
func progressDeadlineExceeded(d *appsv1.Deployment) bool {
	if d.Status == nil || !seenLatest(d) {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == "Progressing" && c.Status == "False" && c.Reason == ProgressDeadlineExceeded {
			return true
		}
	}
	return false
}

// statusOf is the status to report, keeping the previous conditions'
// transition times: meta.SetStatusCondition with the request's time.
func statusOf(previous *v1alpha1.CacheStatus, phase string, ready, replicas int32, generation int64, now string) v1alpha1.CacheStatus {
	var conditions []wasmop.Condition
	status := v1alpha1.CacheStatus{ReadyReplicas: ready, Phase: phase}
	if previous != nil {
		conditions = append(conditions, previous.Conditions...)
		status.LastGoodImage = previous.LastGoodImage
		status.FailedImage = previous.FailedImage
	}
	counts := fmt.Sprintf("%d/%d replicas ready", ready, replicas)
	available := wasmop.Condition{Type: "Available", Status: wasmop.ConditionFalse, Reason: "NoReplicasAvailable", Message: counts, ObservedGeneration: generation}
	switch {
	case phase == PhasePending:
		available.Reason = "DeploymentPending"
	case ready > 0:
		available.Status, available.Reason = wasmop.ConditionTrue, "ReplicasAvailable"
	}
	progressing := wasmop.Condition{Type: "Progressing", ObservedGeneration: generation}
	switch phase {
	case PhasePending:
		progressing.Status, progressing.Reason, progressing.Message = wasmop.ConditionTrue, "Creating", "creating the Deployment, Service and ConfigMap"
	case PhaseProgressing, PhaseDegraded:
		progressing.Status, progressing.Reason, progressing.Message = wasmop.ConditionTrue, "RollingOut", counts
	case PhaseReady:
		progressing.Status, progressing.Reason, progressing.Message = wasmop.ConditionFalse, "RolloutComplete", counts
	case PhasePaused:
		progressing.Status, progressing.Reason, progressing.Message = wasmop.ConditionUnknown, "Paused", "spec.paused is true: children are left as they are"
	}
	wasmop.SetStatusCondition(&conditions, available, now)
	wasmop.SetStatusCondition(&conditions, progressing, now)
	status.Conditions = conditions
	return status
}

// phaseEvents is the Event of a phase that changed.
func phaseEvents(previous *v1alpha1.CacheStatus, phase string) []event {
	before := ""
	if previous != nil {
		before = previous.Phase
	}
	switch before {
	case phase:
		return nil
	case "":
		return []event{normal("PhaseChanged", "phase is "+phase)}
	}
	return []event{normal("PhaseChanged", fmt.Sprintf("phase changed from %s to %s", before, phase))}
}

// changeEvents are the Events of what the answer changes in the
// Deployment: the Events a kubebuilder controller records as it creates
// and updates its children.
func changeEvents(name string, observed *appsv1.Deployment, wanted fingerprint) []event {
	if observed == nil {
		return []event{normal("Created", fmt.Sprintf("creating Deployment %s, Service %s and ConfigMap %s-config", name, name, name))}
	}
	was := observedFingerprint(observed)
	var events []event
	if was.replicas != wanted.replicas {
		events = append(events, normal("Scaled", fmt.Sprintf("scaling Deployment %s from %d to %d replicas", name, max(was.replicas, 0), max(wanted.replicas, 0))))
	}
	if was.image != wanted.image {
		events = append(events, normal("ImageChanged", fmt.Sprintf("updating Deployment %s from image %s to %s", name, orNone(was.image), orNone(wanted.image))))
	}
	if was.configHash != wanted.configHash {
		events = append(events, normal("ConfigChanged", "the config changed; rolling the pods of Deployment "+name))
	}
	if was.secretHash != wanted.secretHash {
		events = append(events, normal("SecretChanged", "the password Secret changed; rolling the pods of Deployment "+name))
	}
	return events
}

func orNone(text string) string {
	if text == "" {
		return "(none)"
	}
	return text
}
