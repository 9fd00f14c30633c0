package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// CacheReconciler reconciles Caches as the seeds' section 3.4 does.
type CacheReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// Reconcile reads the Cache, makes its Deployment and Service exist with
// the desired replicas and image, and writes the status from the
// Deployment's.
func (r *CacheReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)

	var cache Cache
	if err := r.Get(ctx, req.NamespacedName, &cache); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}

	replicas := int32(1)
	if cache.Spec.Replicas != nil {
		replicas = *cache.Spec.Replicas
	}

	deployment := desiredDeployment(&cache, replicas)
	if err := controllerutil.SetControllerReference(&cache, deployment, r.Scheme); err != nil {
		return ctrl.Result{}, err
	}
	var current appsv1.Deployment
	key := types.NamespacedName{Name: deployment.Name, Namespace: deployment.Namespace}
	err := r.Get(ctx, key, &current)
	switch {
	case apierrors.IsNotFound(err):
		logger.Info("creating deployment", "name", deployment.Name)
		if err := r.Create(ctx, deployment); err != nil {
			return ctrl.Result{}, err
		}
	case err != nil:
		return ctrl.Result{}, err
	default:
		updated := false
		if *current.Spec.Replicas != replicas {
			current.Spec.Replicas = &replicas
			updated = true
		}
		containers := current.Spec.Template.Spec.Containers
		if len(containers) > 0 && containers[0].Image != cache.Spec.Image {
			containers[0].Image = cache.Spec.Image
			updated = true
		}
		if updated {
			logger.Info("updating deployment", "name", current.Name)
			if err := r.Update(ctx, &current); err != nil {
				return ctrl.Result{}, err
			}
		}
	}

	service := desiredService(&cache)
	if err := controllerutil.SetControllerReference(&cache, service, r.Scheme); err != nil {
		return ctrl.Result{}, err
	}
	var currentService corev1.Service
	err = r.Get(ctx, types.NamespacedName{Name: service.Name, Namespace: service.Namespace}, &currentService)
	if apierrors.IsNotFound(err) {
		logger.Info("creating service", "name", service.Name)
		if err := r.Create(ctx, service); err != nil {
			return ctrl.Result{}, err
		}
	} else if err != nil {
		return ctrl.Result{}, err
	}

	var latest appsv1.Deployment
	if err := r.Get(ctx, key, &latest); err != nil {
		return ctrl.Result{}, err
	}
	cache.Status.ReadyReplicas = latest.Status.ReadyReplicas
	if latest.Status.ReadyReplicas == replicas {
		cache.Status.Phase = "Ready"
	} else {
		cache.Status.Phase = "Progressing"
	}
	cache.Status.Conditions = []metav1.Condition{{
		Type:               "Available",
		Status:             metav1.ConditionTrue,
		Reason:             cache.Status.Phase,
		Message:            fmt.Sprintf("ready replicas: %d", latest.Status.ReadyReplicas),
		ObservedGeneration: cache.Generation,
		LastTransitionTime: metav1.Now(),
	}}
	if err := r.Status().Update(ctx, &cache); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

func cacheLabels(cache *Cache) map[string]string {
	return map[string]string{"app": "cache", "cache": cache.Name}
}

func desiredDeployment(cache *Cache, replicas int32) *appsv1.Deployment {
	labels := cacheLabels(cache)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: cache.Name, Namespace: cache.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "cache",
						Image: cache.Spec.Image,
						Ports: []corev1.ContainerPort{{ContainerPort: cache.Spec.Port, Name: "tcp"}},
					}},
				},
			},
		},
	}
}

func desiredService(cache *Cache) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: cache.Name, Namespace: cache.Namespace},
		Spec: corev1.ServiceSpec{
			Selector: cacheLabels(cache),
			Ports: []corev1.ServicePort{{
				Name:       "tcp",
				Port:       cache.Spec.Port,
				TargetPort: intstr.FromInt32(cache.Spec.Port),
			}},
		},
	}
}
