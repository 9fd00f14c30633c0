package cacheoperator

import (
	"example.com/cache-operator/k8s/appsv1"
	"example.com/cache-operator/k8s/corev1"
	wasmop "wasmop.dev/sdk"
)

// The names of what the Deployment runs.
const (
	ConfigHashAnnotation = "apps.example.com/config-hash"
	ConfigMountPath      = "/etc/cache"
	ContainerName        = "cache"
	PortName             = "cache"
	ConfigVolume         = "config"
)

// labelsForCache are the labels of a Cache's children and the selector of
// its pods.
func labelsForCache(name string) map[string]string {
	return map[string]string{"app": "cache", "cache": name}
}

// configMapForCache is the ConfigMap <name>-config holding spec.config.
func configMapForCache(name string, spec cacheSpec) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   wasmop.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: wasmop.ObjectMeta{Name: name + "-config", Labels: labelsForCache(name)},
		Data:       spec.Config,
	}
}

// deploymentForCache is the seeds' desiredDeployment: spec.image with the
// config mounted, the config's hash on the pod template (a config change
// rolls the pods) and, with spec.auth, the password from its Secret.
// SetControllerReference has no counterpart: the host sets the owner.
func deploymentForCache(name string, spec cacheSpec, configHash string, secret secretState, replicas int32) *appsv1.Deployment {
	labels := labelsForCache(name)
	annotations := map[string]string{ConfigHashAnnotation: configHash}
	container := corev1.Container{
		Name:         ContainerName,
		Image:        spec.Image,
		Ports:        []corev1.ContainerPort{{Name: PortName, ContainerPort: spec.Port}},
		VolumeMounts: []corev1.VolumeMount{{Name: ConfigVolume, MountPath: ConfigMountPath, ReadOnly: true}},
	}
	if secret.hash != "" {
		annotations[SecretHashAnnotation] = secret.hash
		container.Env = []corev1.EnvVar{{
			Name: PasswordEnv,
			ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				Name: secret.name, Key: secret.key,
			}},
		}}
	}
	// Kubernetes' own verdict on a rollout: after this long without
	// progress the Deployment controller reports ProgressDeadlineExceeded.
	deadline := spec.UpgradeTimeoutSeconds
	return &appsv1.Deployment{
		TypeMeta:   wasmop.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: wasmop.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas:                &replicas,
			ProgressDeadlineSeconds: &deadline,
			Selector:                &appsv1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: wasmop.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{container},
					Volumes: []corev1.Volume{{
						Name:      ConfigVolume,
						ConfigMap: &corev1.ConfigMapVolumeSource{Name: name + "-config"},
					}},
				},
			},
		},
	}
}

// serviceForCache is the seeds' desiredService.
func serviceForCache(name string, spec cacheSpec) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   wasmop.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: wasmop.ObjectMeta{Name: name, Labels: labelsForCache(name)},
		Spec: corev1.ServiceSpec{
			Selector: labelsForCache(name),
			Ports:    []corev1.ServicePort{{Name: PortName, Port: spec.Port, TargetPort: spec.Port}},
		},
	}
}

// observedFingerprint is what the observed Deployment's spec asks for.
func observedFingerprint(d *appsv1.Deployment) fingerprint {
	f := fingerprint{replicas: -1, port: -1}
	if d.Spec.Replicas != nil {
		f.replicas = int64(*d.Spec.Replicas)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == ContainerName {
			f.image = c.Image
			if len(c.Ports) > 0 {
				f.port = int64(c.Ports[0].ContainerPort)
			}
			break
		}
	}
	f.configHash = d.Spec.Template.ObjectMeta.Annotations[ConfigHashAnnotation]
	f.secretHash = d.Spec.Template.ObjectMeta.Annotations[SecretHashAnnotation]
	return f
}
