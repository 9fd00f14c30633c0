// Package appsv1 is the part of k8s.io/api/apps/v1 the cache-operator uses.
package appsv1

import (
	"example.com/cache-operator/k8s/corev1"
	wasmop "wasmop.dev/sdk"
)

// Deployment is apps/v1 Deployment.
type Deployment struct {
	wasmop.TypeMeta `json:",inline"`
	ObjectMeta      wasmop.ObjectMeta `json:"metadata"`
	Spec            DeploymentSpec    `json:"spec"`
	Status          *DeploymentStatus `json:"status,omitempty"`
}

// DeploymentSpec is a Deployment's spec.
type DeploymentSpec struct {
	Replicas                *int32                 `json:"replicas,omitempty"`
	ProgressDeadlineSeconds *int32                 `json:"progressDeadlineSeconds,omitempty"`
	Selector                *LabelSelector         `json:"selector,omitempty"`
	Template                corev1.PodTemplateSpec `json:"template"`
}

// LabelSelector is metav1.LabelSelector's matchLabels.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// DeploymentStatus is what the Deployment controller reports.
type DeploymentStatus struct {
	ObservedGeneration *int64                `json:"observedGeneration,omitempty"`
	Replicas           *int32                `json:"replicas,omitempty"`
	UpdatedReplicas    *int32                `json:"updatedReplicas,omitempty"`
	ReadyReplicas      *int32                `json:"readyReplicas,omitempty"`
	Conditions         []DeploymentCondition `json:"conditions,omitempty"`
}

// DeploymentCondition is one condition of a Deployment.
type DeploymentCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}
