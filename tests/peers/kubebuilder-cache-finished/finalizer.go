package main

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// finalizerName is the finalizer the cache-operator guest declares.
const finalizerName = "apps.example.com/cache-cleanup"

// pollInterval is how often a deleting Cache looks again while its pods
// stop (the Deployment's changes wake it too), as the guest's POLL_SECONDS.
const pollInterval = 30 * time.Second

// reconcileDelete is the seeds' deletion path with its cleanup: the
// Deployment scaled to zero, the Cache held until its pods are gone, then
// removed from the external registry (if any), and only then the finalizer
// removed.
func (r *CacheReconciler) reconcileDelete(ctx context.Context, cache *Cache) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(cache, finalizerName) {
		return ctrl.Result{}, nil
	}
	name := cache.Name
	d, err := r.deployment(ctx, cache)
	if err != nil {
		return ctrl.Result{}, err
	}
	var done event
	switch {
	case d == nil:
		done = normal("CleanupComplete", fmt.Sprintf("no Deployment %s left; the Cache can go", name))
	case d.Status.Replicas == 0:
		done = normal("CleanupComplete", fmt.Sprintf("all pods of Deployment %s have stopped; the Cache can go", name))
	default:
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
			wanted := int32(1)
			if d.Spec.Replicas != nil {
				wanted = *d.Spec.Replicas
			}
			zero := int32(0)
			d.Spec.Replicas = &zero
			if err := r.Update(ctx, d); err != nil {
				return ctrl.Result{}, err
			}
			r.record(cache, []event{normal("CleanupStarted", fmt.Sprintf("scaling Deployment %s from %d to 0 replicas before deletion", name, wanted))})
		} else {
			r.record(cache, []event{normal("CleanupWaiting", fmt.Sprintf("waiting for %d pod(s) of Deployment %s to stop", d.Status.Replicas, name))})
		}
		return ctrl.Result{RequeueAfter: pollInterval}, nil
	}
	recorded := []event{done}
	if r.RegistryURL != "" {
		removed, err := r.deregister(ctx, cache)
		if err != nil {
			return ctrl.Result{}, err
		}
		if removed != nil {
			recorded = append(recorded, *removed)
		}
	}
	controllerutil.RemoveFinalizer(cache, finalizerName)
	if err := r.Update(ctx, cache); err != nil {
		return ctrl.Result{}, err
	}
	r.record(cache, recorded)
	return ctrl.Result{}, nil
}
