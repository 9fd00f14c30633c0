package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// CacheReconciler reconciles Caches as the seeds' chapter finishes its
// operator: the skeleton of section 4.3 (Get, reconcileDelete,
// ensureFinalizer, desired state, apply, updateStatus) with the stages of
// section 5.
type CacheReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// RegistryURL is the external registry of stage 4's cleanup; empty:
	// none.
	RegistryURL string
}

// event is one Event the reconcile records once its writes are done.
type event struct {
	eventType, reason, note string
}

func normal(reason, note string) event  { return event{corev1.EventTypeNormal, reason, note} }
func warning(reason, note string) event { return event{corev1.EventTypeWarning, reason, note} }

// Reconcile follows the seeds' skeleton: the deletion path first, the
// finalizer, then pause, the Secret, the desired children, the upgrade and
// the status, and the Events of what changed.
func (r *CacheReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cache Cache
	if err := r.Get(ctx, req.NamespacedName, &cache); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cache.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, &cache)
	}
	if err := r.ensureFinalizer(ctx, &cache); err != nil {
		return ctrl.Result{}, err
	}
	observed, err := r.deployment(ctx, &cache)
	if err != nil {
		return ctrl.Result{}, err
	}
	if cache.Spec.Paused {
		return ctrl.Result{}, r.reconcilePaused(ctx, &cache, observed)
	}
	pw, err := r.password(ctx, &cache)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pw.missing != "" {
		return ctrl.Result{}, r.reconcileSecretMissing(ctx, &cache, observed, pw.missing)
	}

	replicas := cache.Spec.replicas()
	desired := desiredState(&cache, cache.Spec.Image, pw)
	upgrade := decideUpgrade(cache.Spec.Image, &cache.Status, observed, desired.fingerprint())
	if held := upgrade.heldAt(); held != "" {
		// After a rollback the Deployment runs the last good image; the
		// spec is the user's and stays as it is.
		desired = desiredState(&cache, held, pw)
	}
	wanted := desired.fingerprint()
	rollout := rolloutPhase(observed, wanted)
	ready := readyReplicas(observed)
	status := cache.Status.DeepCopy()
	setStatus(status, rollout, ready, replicas, cache.Generation)
	upgradeEvent := upgrade.report(status, cache.Spec.Image, rollout, cache.Generation, cache.Spec.timeoutSeconds())
	phase := upgrade.phase(rollout, ready, replicas)
	status.Phase = phase

	var recorded []event
	var registryErr error
	if phase == PhaseReady && r.RegistryURL != "" {
		var e *event
		e, registryErr = r.register(ctx, &cache, status)
		if e != nil {
			recorded = append(recorded, *e)
		}
	}
	recorded = append(recorded, changeEvents(cache.Name, observed, wanted)...)
	if upgradeEvent != nil {
		recorded = append(recorded, *upgradeEvent)
	}
	if e := phaseEvent(cache.Status.Phase, phase); e != nil {
		recorded = append(recorded, *e)
	}
	if observed == nil {
		log.FromContext(ctx).Info("creating children", "name", cache.Name)
	}
	if err := r.applyDesiredState(ctx, &cache, desired); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.updateStatus(ctx, &cache, status); err != nil {
		return ctrl.Result{}, err
	}
	r.record(&cache, recorded)
	return ctrl.Result{}, registryErr
}

// deployment is the Cache's Deployment as the cache holds it; nil when it
// does not exist.
func (r *CacheReconciler) deployment(ctx context.Context, cache *Cache) (*appsv1.Deployment, error) {
	var d appsv1.Deployment
	err := r.Get(ctx, types.NamespacedName{Namespace: cache.Namespace, Name: cache.Name}, &d)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &d, nil
}

// updateStatus writes status unless the Cache already shows it (the
// conditions keep their transition times unless they flip, so a converged
// Cache gets no write).
func (r *CacheReconciler) updateStatus(ctx context.Context, cache *Cache, status *CacheStatus) error {
	status.ObservedGeneration = cache.Generation
	if equality.Semantic.DeepEqual(&cache.Status, status) {
		return nil
	}
	cache.Status = *status
	return r.Status().Update(ctx, cache)
}

// record writes the Events through the manager's recorder.
func (r *CacheReconciler) record(cache *Cache, recorded []event) {
	for _, e := range recorded {
		r.Recorder.Eventf(cache, nil, e.eventType, e.reason, "Reconcile", "%s", e.note)
	}
}

// reconcilePaused leaves every child as it is and reports phase Paused.
func (r *CacheReconciler) reconcilePaused(ctx context.Context, cache *Cache, observed *appsv1.Deployment) error {
	status := cache.Status.DeepCopy()
	setStatus(status, PhasePaused, readyReplicas(observed), cache.Spec.replicas(), cache.Generation)
	status.Phase = PhasePaused
	if err := r.updateStatus(ctx, cache, status); err != nil {
		return err
	}
	var recorded []event
	if e := phaseEvent(cache.Status.Phase, PhasePaused); e != nil {
		recorded = append(recorded, *e)
	}
	r.record(cache, recorded)
	return nil
}

// reconcileSecretMissing leaves every child as it is while the Secret or
// key spec.auth.secretRef names is missing: phase Pending, both conditions
// False with reason SecretMissing, a Warning the first time.
func (r *CacheReconciler) reconcileSecretMissing(ctx context.Context, cache *Cache, observed *appsv1.Deployment, message string) error {
	status := cache.Status.DeepCopy()
	var recorded []event
	if !reportsSecretMissing(&cache.Status) {
		recorded = append(recorded, warning(reasonSecretMissing, message))
	}
	setSecretMissing(status, readyReplicas(observed), cache.Generation, message)
	if e := phaseEvent(cache.Status.Phase, PhasePending); e != nil {
		recorded = append(recorded, *e)
	}
	if err := r.updateStatus(ctx, cache, status); err != nil {
		return err
	}
	r.record(cache, recorded)
	return nil
}

// changeEvents are the Events for what this reconcile changes in the
// Deployment: created, scaled, new image, new config, new password.
func changeEvents(name string, observed *appsv1.Deployment, will fingerprint) []event {
	if observed == nil {
		return []event{normal("Created", fmt.Sprintf("creating Deployment %s, Service %s and ConfigMap %s-config", name, name, name))}
	}
	was := fingerprintOf(observed)
	var out []event
	if was.replicas != will.replicas {
		out = append(out, normal("Scaled", fmt.Sprintf("scaling Deployment %s from %d to %d replicas", name, was.replicas, will.replicas)))
	}
	if was.image != will.image {
		out = append(out, normal("ImageChanged", fmt.Sprintf("updating Deployment %s from image %s to %s", name, orNone(was.image), orNone(will.image))))
	}
	if was.configHash != will.configHash {
		out = append(out, normal("ConfigChanged", fmt.Sprintf("the config changed; rolling the pods of Deployment %s", name)))
	}
	if was.secretHash != will.secretHash {
		out = append(out, normal("SecretChanged", fmt.Sprintf("the password Secret changed; rolling the pods of Deployment %s", name)))
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// phaseEvent is a PhaseChanged Event when phase differs from before.
func phaseEvent(before, phase string) *event {
	if before == phase {
		return nil
	}
	note := fmt.Sprintf("phase is %s", phase)
	if before != "" {
		note = fmt.Sprintf("phase changed from %s to %s", before, phase)
	}
	e := normal("PhaseChanged", note)
	return &e
}

// ensureFinalizer adds the finalizer, as the seeds' skeleton does before
// anything else is written.
func (r *CacheReconciler) ensureFinalizer(ctx context.Context, cache *Cache) error {
	if controllerutil.AddFinalizer(cache, finalizerName) {
		return r.Update(ctx, cache)
	}
	return nil
}
