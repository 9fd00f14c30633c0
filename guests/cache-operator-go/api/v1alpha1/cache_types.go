// Package v1alpha1 is the Cache API as the seeds' kubebuilder chapter
// defines it (api/v1alpha1/cache_types.go), with the fields the wasmop
// cache-operator adds: config, paused, auth and upgrade. The markers are
// kept as they are read by controller-gen; deploy/crds/cache.yaml is the
// CRD they describe.
package v1alpha1

import wasmop "wasmop.dev/sdk"

// CacheSpec is the state the user wants.
type CacheSpec struct {
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Replicas *int32 `json:"replicas,omitempty"`

	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=6379
	Port *int32 `json:"port,omitempty"`

	// Config is the cache server's configuration, one file per key in
	// the ConfigMap <name>-config mounted at /etc/cache.
	Config map[string]string `json:"config,omitempty"`

	// Paused leaves every child as it is.
	Paused bool `json:"paused,omitempty"`

	// Auth names the Secret key holding the server's password.
	Auth *CacheAuth `json:"auth,omitempty"`

	// Upgrade says how long a new image may take to roll out.
	Upgrade *CacheUpgrade `json:"upgrade,omitempty"`
}

// CacheAuth is spec.auth.
type CacheAuth struct {
	SecretRef SecretKeyRef `json:"secretRef"`
}

// SecretKeyRef names one key of a Secret in the Cache's namespace.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// CacheUpgrade is spec.upgrade.
type CacheUpgrade struct {
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=3600
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// CacheStatus is the state the controller observed.
type CacheStatus struct {
	ReadyReplicas      int32              `json:"readyReplicas"`
	Phase              string             `json:"phase,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	LastGoodImage      string             `json:"lastGoodImage,omitempty"`
	FailedImage        string             `json:"failedImage,omitempty"`
	Conditions         []wasmop.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=cc
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"

// Cache is a cache server: a Deployment, a Service and a ConfigMap.
type Cache struct {
	wasmop.TypeMeta `json:",inline"`
	ObjectMeta      wasmop.ObjectMeta `json:"metadata,omitempty"`

	Spec   CacheSpec    `json:"spec,omitempty"`
	Status *CacheStatus `json:"status,omitempty"`
}
