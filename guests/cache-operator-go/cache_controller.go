// Package cacheoperator is the seeds' Cache operator (the kubebuilder
// chapter's internal/controller/cache_controller.go) as a wasmop guest,
// with the Rust guest's behaviour (guests/cache-operator): for a Cache it
// wants a ConfigMap <name>-config holding spec.config, a Deployment <name>
// running spec.image with the config mounted and its hash on the pod
// template, and a Service <name>; it reports readyReplicas, phase and the
// conditions Available and Progressing; while paused it keeps every child
// as it is; on deletion its finalizer scales the Deployment to zero and
// holds the Cache until the pods are gone. A change of spec.image is an
// upgrade, rolled back to status.lastGoodImage when the Deployment
// controller reports ProgressDeadlineExceeded (upgrade.go). It also
// defaults and validates Caches (cache_webhook.go) and converts them
// between v1alpha1 and v1beta1 (cache_conversion.go).
//
// Where kubebuilder's Reconcile reads the cluster (r.Get) and writes it
// (r.Create, r.Update, r.Status().Update), this one reads its request and
// answers: the host applies the children, prunes the rest, writes the
// status and records the Events. Everything is a pure function of the
// request, so a converged Cache gets the same answer on every resync and
// the host writes nothing.
package cacheoperator

import (
	"strings"

	"example.com/cache-operator/api/v1alpha1"
	"example.com/cache-operator/k8s/appsv1"
	"example.com/cache-operator/k8s/corev1"
	wasmop "wasmop.dev/sdk"
)

// Group is the Cache kind's API group unless the settings name another.
const Group = "apps.example.com"

// Finalizer holds a deleted Cache until its pods are gone.
const Finalizer = "apps.example.com/cache-cleanup"

// CacheReconciler reconciles Caches: kubebuilder's CacheReconciler,
// without a client (the host has it) or a scheme (the host sets owners).
type CacheReconciler struct{}

// The RBAC a kubebuilder controller declares with markers, the host
// derives from Describe (`wasmop rbac --guest cache-operator-go.wasm`):
// the Caches and their status and finalizers, and the children's kinds.

// Describe is SetupWithManager: For Caches, Owns ConfigMaps, Deployments
// and Services, Watches the Secret spec.auth.secretRef names.
func (r *CacheReconciler) Describe(settings wasmop.Settings) (wasmop.Description, error) {
	parsed, err := ParseSettings(settings)
	if err != nil {
		return wasmop.Description{}, err
	}
	return wasmop.For(wasmop.KindRef{Group: parsed.group(), Version: parsed.Version, Kind: "Cache"}).
		Owns(wasmop.KindConfigMap).
		Owns(wasmop.KindDeployment).
		Owns(wasmop.KindService).
		WithFinalizer(Finalizer).
		Watches(wasmop.KindSecret, wasmop.ByNameAt(SecretNamePointer)).
		Complete(), nil
}

// Reconcile answers one Cache's request, as kubebuilder's Reconcile does
// its work: deletion first (a paused or invalid Cache must still be
// deletable), then pause, validation, the password, and the children and
// status.
func (r *CacheReconciler) Reconcile(req *wasmop.Request) (*wasmop.Response, error) {
	settings, err := ParseSettings(req.Settings())
	if err != nil {
		return nil, wasmop.Permanent(err.Error())
	}
	cache, err := cacheOf(req, settings)
	if err != nil {
		return nil, err
	}
	name := cache.ObjectMeta.Name
	if name == "" {
		return nil, wasmop.Permanent("the Cache has no metadata.name")
	}
	spec := specOf(cache, settings)
	registry := registryOf(settings, cache, spec)
	if req.Deleting() {
		return r.reconcileDelete(req, cache, spec, registry), nil
	}
	if spec.Paused {
		return reconcilePaused(req, cache, spec), nil
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	secret := password(req, spec.Auth)
	if secret.missing != "" {
		return reconcileSecretMissing(req, cache, secret.missing), nil
	}
	hash := configHash(spec.Config)
	var observed *appsv1.Deployment
	var deployment appsv1.Deployment
	if found, err := req.DecodeObserved(wasmop.KindDeployment, name, &deployment); err != nil {
		return nil, err
	} else if found {
		observed = &deployment
	}
	previous := cache.Status
	upgrade := decideUpgrade(spec.Image, previous, observed, spec.fingerprint(hash, secret.hash))
	// After a rollback the Deployment runs the last good image, not the
	// spec's: the spec is the user's and stays as it is.
	running := spec
	if held := upgrade.heldAt(); held != "" {
		running.Image = held
	}
	wanted := running.fingerprint(hash, secret.hash)
	rollout := PhaseProgressing
	switch {
	case observed == nil:
		rollout = PhasePending
	case rolloutComplete(observed, wanted):
		rollout = PhaseReady
	}
	ready := readyReplicas(observed)
	status := statusOf(previous, rollout, ready, spec.Replicas, req.Generation(), req.Now())
	upgradeEvent := reportUpgrade(upgrade, &status, spec.Image, rollout, req.Generation(), spec.UpgradeTimeoutSeconds, req.Now())
	status.Phase = upgrade.phase(rollout, ready, spec.Replicas)
	response := wasmop.NewResponse()
	var events []event
	if status.Phase == PhaseReady && registry != nil {
		registered, retry := registry.register(&status, req.Now())
		if registered != nil {
			events = append(events, *registered)
		}
		if retry > 0 {
			response.RequeueAfter(retry)
		}
	}
	events = append(events, changeEvents(name, observed, wanted)...)
	if upgradeEvent != nil {
		events = append(events, *upgradeEvent)
	}
	events = append(events, phaseEvents(previous, status.Phase)...)
	for _, e := range events {
		wasmop.Log.Info("cache " + name + ": " + e.reason + ": " + e.message)
		response.Event(e.eventType, e.reason, e.message)
	}
	return response.
		Child(configMapForCache(name, running)).
		Child(deploymentForCache(name, running, hash, secret, running.Replicas)).
		Child(serviceForCache(name, running)).
		Status(status), nil
}

// cacheOf is the parent in the v1alpha1 shape the logic is written for.
func cacheOf(req *wasmop.Request, settings Settings) (*v1alpha1.Cache, error) {
	var cache v1alpha1.Cache
	if settings.Version == V1Alpha1 {
		if err := req.DecodeParent(&cache); err != nil {
			return nil, err
		}
		return &cache, nil
	}
	parent := wasmop.DeepCopy(req.Parent())
	apiVersion, _ := parent["apiVersion"].(string)
	group, _, _ := strings.Cut(apiVersion, "/")
	alpha, err := convert(parent, group+"/"+V1Alpha1)
	if err != nil {
		return nil, wasmop.Permanent(err.Error())
	}
	text, err := jsonOf(alpha)
	if err != nil {
		return nil, wasmop.Permanent(err.Error())
	}
	if err := decode(text, &cache); err != nil {
		return nil, wasmop.Permanentf("the Cache does not decode: %v", err)
	}
	return &cache, nil
}

// event is one Event the answer records.
type event struct {
	eventType wasmop.EventType
	reason    string
	message   string
}

func normal(reason, message string) event {
	return event{eventType: wasmop.EventNormal, reason: reason, message: message}
}

func warning(reason, message string) event {
	return event{eventType: wasmop.EventWarning, reason: reason, message: message}
}

func init() {
	wasmop.Export(&CacheReconciler{})
	// The types every reconcile decodes and encodes: their JSON tables are
	// built while `wasmop build` pre-initialises the module.
	wasmop.Prepare(v1alpha1.Cache{}, appsv1.Deployment{}, corev1.ConfigMap{}, corev1.Service{}, corev1.Secret{})
}
