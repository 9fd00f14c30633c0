package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CacheSpec is the user's desired state: the seeds' cache_types.go with
// the fields stages 3 and 4 add (config, auth, paused, upgrade), as the
// Cache CRD in deploy/crds declares them for v1alpha1.
type CacheSpec struct {
	Image    string            `json:"image"`
	Replicas *int32            `json:"replicas,omitempty"`
	Port     int32             `json:"port,omitempty"`
	Config   map[string]string `json:"config,omitempty"`
	Paused   bool              `json:"paused,omitempty"`
	Auth     *CacheAuth        `json:"auth,omitempty"`
	Upgrade  *CacheUpgrade     `json:"upgrade,omitempty"`
}

// CacheAuth names the Secret key holding the cache server's password.
type CacheAuth struct {
	SecretRef SecretKeyRef `json:"secretRef"`
}

// SecretKeyRef is a key of a Secret in the Cache's namespace.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// CacheUpgrade says how a change of image rolls out.
type CacheUpgrade struct {
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// CacheStatus is what the controller observed.
type CacheStatus struct {
	ReadyReplicas      int32              `json:"readyReplicas,omitempty"`
	Phase              string             `json:"phase,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	LastGoodImage      string             `json:"lastGoodImage,omitempty"`
	FailedImage        string             `json:"failedImage,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// Cache is the custom resource.
type Cache struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CacheSpec   `json:"spec,omitempty"`
	Status CacheStatus `json:"status,omitempty"`
}

// CacheList is a list of Caches.
type CacheList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cache `json:"items"`
}

// The defaults the CRD declares, for a Cache read before they applied.
const (
	defaultReplicas       = 1
	defaultPort           = 6379
	defaultTimeoutSeconds = 300
)

func (s *CacheSpec) replicas() int32 {
	if s.Replicas == nil {
		return defaultReplicas
	}
	return *s.Replicas
}

func (s *CacheSpec) port() int32 {
	if s.Port == 0 {
		return defaultPort
	}
	return s.Port
}

func (s *CacheSpec) timeoutSeconds() int32 {
	if s.Upgrade == nil || s.Upgrade.TimeoutSeconds == nil {
		return defaultTimeoutSeconds
	}
	return *s.Upgrade.TimeoutSeconds
}

// The deep copies controller-gen would generate.

func (in *CacheSpec) DeepCopyInto(out *CacheSpec) {
	*out = *in
	if in.Replicas != nil {
		r := *in.Replicas
		out.Replicas = &r
	}
	if in.Config != nil {
		out.Config = make(map[string]string, len(in.Config))
		for k, v := range in.Config {
			out.Config[k] = v
		}
	}
	if in.Auth != nil {
		a := *in.Auth
		out.Auth = &a
	}
	if in.Upgrade != nil {
		u := CacheUpgrade{}
		if in.Upgrade.TimeoutSeconds != nil {
			t := *in.Upgrade.TimeoutSeconds
			u.TimeoutSeconds = &t
		}
		out.Upgrade = &u
	}
}

func (in *CacheStatus) DeepCopyInto(out *CacheStatus) {
	*out = *in
	if in.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

func (in *CacheStatus) DeepCopy() *CacheStatus {
	out := new(CacheStatus)
	in.DeepCopyInto(out)
	return out
}

func (in *Cache) DeepCopyInto(out *Cache) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

func (in *Cache) DeepCopy() *Cache {
	if in == nil {
		return nil
	}
	out := new(Cache)
	in.DeepCopyInto(out)
	return out
}

func (in *Cache) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *CacheList) DeepCopyInto(out *CacheList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Cache, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

func (in *CacheList) DeepCopy() *CacheList {
	if in == nil {
		return nil
	}
	out := new(CacheList)
	in.DeepCopyInto(out)
	return out
}

func (in *CacheList) DeepCopyObject() runtime.Object { return in.DeepCopy() }
