// Package corev1 is the part of k8s.io/api/core/v1 the cache-operator uses.
package corev1

import wasmop "wasmop.dev/sdk"

// ConfigMap is core/v1 ConfigMap.
type ConfigMap struct {
	wasmop.TypeMeta `json:",inline"`
	ObjectMeta      wasmop.ObjectMeta `json:"metadata"`
	Data            map[string]string `json:"data,omitempty"`
}

// Service is core/v1 Service.
type Service struct {
	wasmop.TypeMeta `json:",inline"`
	ObjectMeta      wasmop.ObjectMeta `json:"metadata"`
	Spec            ServiceSpec       `json:"spec"`
}

// ServiceSpec is a Service's spec.
type ServiceSpec struct {
	Selector map[string]string `json:"selector,omitempty"`
	Ports    []ServicePort     `json:"ports,omitempty"`
}

// ServicePort is one port of a Service.
type ServicePort struct {
	Name       string `json:"name,omitempty"`
	Port       int32  `json:"port"`
	TargetPort int32  `json:"targetPort,omitempty"`
}

// Secret is core/v1 Secret: the host sends its data concealed (each
// value's SHA-256) unless the guest list says secretValues.
type Secret struct {
	wasmop.TypeMeta `json:",inline"`
	ObjectMeta      wasmop.ObjectMeta `json:"metadata"`
	Data            map[string]string `json:"data,omitempty"`
}

// PodTemplateSpec is a pod template.
type PodTemplateSpec struct {
	ObjectMeta wasmop.ObjectMeta `json:"metadata"`
	Spec       PodSpec           `json:"spec"`
}

// PodSpec is a pod's spec.
type PodSpec struct {
	Containers []Container `json:"containers"`
	Volumes    []Volume    `json:"volumes,omitempty"`
}

// Container is one container of a pod.
type Container struct {
	Name         string          `json:"name"`
	Image        string          `json:"image,omitempty"`
	Ports        []ContainerPort `json:"ports,omitempty"`
	Env          []EnvVar        `json:"env,omitempty"`
	VolumeMounts []VolumeMount   `json:"volumeMounts,omitempty"`
}

// ContainerPort is one port of a container.
type ContainerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
}

// EnvVar is one environment variable of a container.
type EnvVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value,omitempty"`
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource is where an environment variable's value comes from.
type EnvVarSource struct {
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// SecretKeySelector names one key of a Secret.
type SecretKeySelector struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// VolumeMount mounts a volume into a container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// Volume is one volume of a pod.
type Volume struct {
	Name      string                 `json:"name"`
	ConfigMap *ConfigMapVolumeSource `json:"configMap,omitempty"`
}

// ConfigMapVolumeSource mounts a ConfigMap.
type ConfigMapVolumeSource struct {
	Name string `json:"name"`
}
