// Command kubebuilder-cache runs the seeds' Cache controller for one API
// group (--group, default apps.example.com): Get, create-or-update of the
// Deployment and the Service with owner references, status with
// readyReplicas, phase and one condition, Owns(Deployment) and
// Owns(Service). Manager defaults throughout, as the tutorial leaves them.
package main

import (
	"flag"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

func main() {
	var group, namespace, metrics string
	flag.StringVar(&group, "group", "apps.example.com", "API group of the Cache kind this process reconciles")
	flag.StringVar(&namespace, "namespace", "", "only this namespace (default: all)")
	flag.StringVar(&metrics, "metrics-bind-address", "0", "where to serve Prometheus metrics (0: nowhere)")
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
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&Cache{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Complete(&CacheReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}); err != nil {
		log.Error(err, "controller")
		os.Exit(1)
	}
	log.Info("starting manager", "group", group)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
