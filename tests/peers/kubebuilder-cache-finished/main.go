// Command kubebuilder-cache-finished runs the seeds' Cache controller as
// the chapter's learning path finishes it, for one API group (--group,
// default apps.example.com): the chapter-3 controller (tests/peers/
// kubebuilder-cache) with the ConfigMap and the Secret of stage 3, the
// finalizer, pause, upgrade and rollback and status conditions of stage 4,
// and the Events of stage 5, doing per Cache what the wasmop
// cache-operator guest does. Manager defaults throughout, as the tutorial
// leaves them.
package main

import (
	"context"
	"flag"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// secretNameField indexes Caches by the Secret they name, so that a
// Secret's change finds its Caches (the kubebuilder book's "watching
// externally managed resources").
const secretNameField = ".spec.auth.secretRef.name"

func main() {
	var group, namespace, metrics, registry string
	flag.StringVar(&group, "group", "apps.example.com", "API group of the Cache kind this process reconciles")
	flag.StringVar(&namespace, "namespace", "", "only this namespace (default: all)")
	flag.StringVar(&metrics, "metrics-bind-address", "0", "where to serve Prometheus metrics (0: nowhere)")
	flag.StringVar(&registry, "registry-url", "", "the external registry each Ready Cache is registered with and removed from before its finalizer goes (default: none)")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("setup")

	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		log.Error(err, "scheme")
		os.Exit(1)
	}
	builder := &scheme.Builder{GroupVersion: schema.GroupVersion{Group: group, Version: "v1alpha1"}}
	builder.Register(&Cache{}, &CacheList{})
	if err := builder.AddToScheme(s); err != nil {
		log.Error(err, "scheme")
		os.Exit(1)
	}

	options := ctrl.Options{
		Scheme:  s,
		Metrics: metricsserver.Options{BindAddress: metrics},
	}
	if namespace != "" {
		options.Cache.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), options)
	if err != nil {
		log.Error(err, "manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &Cache{}, secretNameField, func(o client.Object) []string {
		c := o.(*Cache)
		if c.Spec.Auth == nil {
			return nil
		}
		return []string{c.Spec.Auth.SecretRef.Name}
	}); err != nil {
		log.Error(err, "index")
		os.Exit(1)
	}
	r := &CacheReconciler{
		Client:      mgr.GetClient(),
		Scheme:      mgr.GetScheme(),
		Recorder:    mgr.GetEventRecorder("cache-controller"),
		RegistryURL: registry,
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&Cache{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.cachesNaming)).
		Complete(r); err != nil {
		log.Error(err, "controller")
		os.Exit(1)
	}
	log.Info("starting manager", "group", group)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// cachesNaming maps a Secret to the Caches in its namespace that name it.
func (r *CacheReconciler) cachesNaming(ctx context.Context, secret client.Object) []reconcile.Request {
	var caches CacheList
	if err := r.List(ctx, &caches, client.InNamespace(secret.GetNamespace()),
		client.MatchingFields{secretNameField: secret.GetName()}); err != nil {
		return nil
	}
	requests := make([]reconcile.Request, 0, len(caches.Items))
	for _, c := range caches.Items {
		requests = append(requests, reconcile.Request{
			NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name},
		})
	}
	return requests
}
