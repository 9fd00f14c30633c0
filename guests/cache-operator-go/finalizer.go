package cacheoperator

import (
	"fmt"
	"time"

	"example.com/cache-operator/api/v1alpha1"
	"example.com/cache-operator/k8s/appsv1"
	wasmop "wasmop.dev/sdk"
)

// PollInterval is how often a deleting Cache is looked at while its pods
// stop: kubebuilder's ctrl.Result{RequeueAfter: ...}. A backstop: each
// change of the Deployment's status.replicas wakes the host.
const PollInterval = 30 * time.Second

// reconcileDelete is the finalizer's path (kubebuilder's reconcileDelete,
// without the finalizer's add and remove: the host adds it to every Cache
// and removes it once the answer says Finalize): the Deployment scaled to
// zero, every other child kept, and the Cache held until no pod is left;
// then, when it may be in a registry, taken out of it. While that fails
// every child is kept and the Cache stays.
func (r *CacheReconciler) reconcileDelete(req *wasmop.Request, cache *v1alpha1.Cache, spec cacheSpec, registry *registry) *wasmop.Response {
	answer := stop(req, cache.ObjectMeta.Name, spec)
	if !answer.Finalized() || registry == nil {
		return answer
	}
	outcome := registry.deregister(cache.Status, req.Now())
	switch {
	case outcome.notRegistered:
		return answer
	case outcome.removed:
		return answer.Normal("Deregistered", "removed Cache "+cache.ObjectMeta.Name+" from its registry").Status(outcome.status)
	}
	blocked := wasmop.NewResponse().KeepObserved(req, nil)
	if outcome.event != nil {
		blocked.Event(outcome.event.eventType, outcome.event.reason, outcome.event.message)
	}
	return blocked.RequeueAfter(outcome.retry).Status(outcome.status)
}

// stop scales the Deployment down; finalized once no pod is left.
func stop(req *wasmop.Request, name string, spec cacheSpec) *wasmop.Response {
	ref := wasmop.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
	response := wasmop.NewResponse().KeepObserved(req, func(r wasmop.ObjectRef) bool { return r == ref })
	var observed appsv1.Deployment
	if found, err := req.DecodeObserved(wasmop.KindDeployment, name, &observed); err != nil || !found {
		return response.Finalize().Normal("CleanupComplete", fmt.Sprintf("no Deployment %s left; the Cache can go", name))
	}
	pods := int32(0)
	if observed.Status != nil && observed.Status.Replicas != nil {
		pods = *observed.Status.Replicas
	}
	if pods == 0 {
		return response.Keep(ref).Finalize().
			Normal("CleanupComplete", fmt.Sprintf("all pods of Deployment %s have stopped; the Cache can go", name))
	}
	if err := spec.validate(); err != nil {
		return response.Keep(ref).Finalize().Warning("CleanupSkipped",
			fmt.Sprintf("cannot scale Deployment %s down (%s); the garbage collector removes it with the Cache", name, err))
	}
	// The image the Deployment runs: after a rollback, not the spec's.
	running := spec
	var status *v1alpha1.CacheStatus
	if parent, ok := req.Status(); ok {
		status = statusFields(parent)
	}
	if held := heldImage(spec.Image, status); held != "" {
		running.Image = held
	}
	response.Child(deploymentForCache(name, running, configHash(spec.Config), password(req, spec.Auth), 0)).
		RequeueAfter(PollInterval)
	if wanted := max(observedFingerprint(&observed).replicas, 0); wanted != 0 {
		return response.Normal("CleanupStarted", fmt.Sprintf("scaling Deployment %s from %d to 0 replicas before deletion", name, wanted))
	}
	return response.Normal("CleanupWaiting", fmt.Sprintf("waiting for %d pod(s) of Deployment %s to stop", pods, name))
}

// statusFields reads a parent's status as the Cache's; what does not
// decode reads as absent.
func statusFields(status wasmop.Object) *v1alpha1.CacheStatus {
	text, err := jsonOf(status)
	if err != nil {
		return nil
	}
	var out v1alpha1.CacheStatus
	if decode(text, &out) != nil {
		return nil
	}
	return &out
}

// reconcilePaused keeps every child as it is and reports Paused.
func reconcilePaused(req *wasmop.Request, cache *v1alpha1.Cache, spec cacheSpec) *wasmop.Response {
	response := wasmop.NewResponse().KeepObserved(req, nil)
	for _, e := range phaseEvents(cache.Status, PhasePaused) {
		response.Event(e.eventType, e.reason, e.message)
	}
	var observed *appsv1.Deployment
	var deployment appsv1.Deployment
	if found, _ := req.DecodeObserved(wasmop.KindDeployment, cache.ObjectMeta.Name, &deployment); found {
		observed = &deployment
	}
	return response.Status(statusOf(cache.Status, PhasePaused, readyReplicas(observed), spec.Replicas, req.Generation(), req.Now()))
}

// SecretMissing is the condition reason of a Cache whose Secret or key
// is missing.
const SecretMissing = "SecretMissing"

// reconcileSecretMissing keeps every child as it is, reports Pending with
// SecretMissing, and a Warning Event when the Cache did not report it
// already.
func reconcileSecretMissing(req *wasmop.Request, cache *v1alpha1.Cache, message string) *wasmop.Response {
	response := wasmop.NewResponse().KeepObserved(req, nil)
	previous := cache.Status
	var conditions []wasmop.Condition
	status := v1alpha1.CacheStatus{Phase: PhasePending}
	if previous != nil {
		conditions = append(conditions, previous.Conditions...)
		status.LastGoodImage, status.FailedImage = previous.LastGoodImage, previous.FailedImage
	}
	available := wasmop.FindStatusCondition(conditions, "Available")
	reported := available != nil && available.Reason == SecretMissing
	for _, conditionType := range []string{"Available", "Progressing"} {
		wasmop.SetStatusCondition(&conditions, wasmop.Condition{
			Type: conditionType, Status: wasmop.ConditionFalse, Reason: SecretMissing, Message: message, ObservedGeneration: req.Generation(),
		}, req.Now())
	}
	var deployment appsv1.Deployment
	if found, _ := req.DecodeObserved(wasmop.KindDeployment, cache.ObjectMeta.Name, &deployment); found {
		status.ReadyReplicas = readyReplicas(&deployment)
	}
	status.Conditions = conditions
	if !reported {
		wasmop.Log.Info("cache " + cache.ObjectMeta.Name + ": " + message)
		response.Warning(SecretMissing, message)
	}
	for _, e := range phaseEvents(previous, PhasePending) {
		response.Event(e.eventType, e.reason, e.message)
	}
	return response.Status(status)
}
