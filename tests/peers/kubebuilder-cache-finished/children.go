package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const (
	// configHashAnnotation on the pod template holds the hash of
	// spec.config, so a config change rolls the pods.
	configHashAnnotation = "apps.example.com/config-hash"
	// secretHashAnnotation holds the hash of the password's value, so a
	// rotated Secret rolls the pods.
	secretHashAnnotation = "apps.example.com/secret-hash"
	passwordEnv          = "CACHE_PASSWORD"
	containerName        = "cache"
	portName             = "cache"
	configVolume         = "config"
	configMountPath      = "/etc/cache"
)

// password is what spec.auth asks of the pods: nothing (name empty), the
// Secret key and the hash of its value, or why it is missing.
type password struct {
	name, key, hash string
	missing         string
}

// password looks up the Secret key spec.auth names.
func (r *CacheReconciler) password(ctx context.Context, cache *Cache) (password, error) {
	auth := cache.Spec.Auth
	if auth == nil {
		return password{}, nil
	}
	name, key := auth.SecretRef.Name, auth.SecretRef.Key
	var secret corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: cache.Namespace, Name: name}, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return password{missing: fmt.Sprintf("Secret %s (key %s) does not exist in the Cache's namespace", name, key)}, nil
	case err != nil:
		return password{}, err
	}
	value, ok := secret.Data[key]
	if !ok {
		return password{missing: fmt.Sprintf("Secret %s has no key %s", name, key)}, nil
	}
	return password{name: name, key: key, hash: hash(value)}, nil
}

// hash is the 64-bit FNV-1a hash of b as 16 hex digits: enough to tell
// "changed, roll the pods", as the Deployment controller's
// pod-template-hash does.
func hash(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// configHash hashes spec.config as JSON (encoding/json sorts map keys).
func configHash(config map[string]string) string {
	if config == nil {
		config = map[string]string{}
	}
	b, _ := json.Marshal(config)
	return hash(b)
}

// desired is what a Cache's children should say.
type desired struct {
	cache      *Cache
	image      string
	replicas   int32
	port       int32
	configHash string
	pw         password
}

func desiredState(cache *Cache, image string, pw password) desired {
	return desired{
		cache:      cache,
		image:      image,
		replicas:   cache.Spec.replicas(),
		port:       cache.Spec.port(),
		configHash: configHash(cache.Spec.Config),
		pw:         pw,
	}
}

// fingerprint is what of a Deployment's spec the operator sets and a
// rollout must reach.
type fingerprint struct {
	replicas               int32
	image                  string
	port                   int32
	configHash, secretHash string
}

func (d desired) fingerprint() fingerprint {
	return fingerprint{d.replicas, d.image, d.port, d.configHash, d.pw.hash}
}

func fingerprintOf(d *appsv1.Deployment) fingerprint {
	var f fingerprint
	if d.Spec.Replicas != nil {
		f.replicas = *d.Spec.Replicas
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == containerName {
			f.image = c.Image
			if len(c.Ports) > 0 {
				f.port = c.Ports[0].ContainerPort
			}
		}
	}
	f.configHash = d.Spec.Template.Annotations[configHashAnnotation]
	f.secretHash = d.Spec.Template.Annotations[secretHashAnnotation]
	return f
}

func selectorLabels(name string) map[string]string {
	return map[string]string{"app": "cache", "cache": name}
}

// setLabels puts the Cache's labels on meta, keeping others'.
func setLabels(meta *metav1.ObjectMeta, name string) {
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	for k, v := range selectorLabels(name) {
		meta.Labels[k] = v
	}
}

// applyDesiredState creates or updates the ConfigMap, the Deployment and
// the Service, each owned by the Cache (controllerutil.CreateOrUpdate:
// read from the cache, changed in place, written only when it differs).
func (r *CacheReconciler) applyDesiredState(ctx context.Context, cache *Cache, want desired) error {
	name := cache.Name
	configMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-config", Namespace: cache.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, configMap, func() error {
		setLabels(&configMap.ObjectMeta, name)
		configMap.Data = nil
		if len(cache.Spec.Config) > 0 {
			configMap.Data = cache.Spec.Config
		}
		return controllerutil.SetControllerReference(cache, configMap, r.Scheme)
	}); err != nil {
		return err
	}
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cache.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, deployment, func() error {
		want.mutateDeployment(deployment)
		return controllerutil.SetControllerReference(cache, deployment, r.Scheme)
	}); err != nil {
		return err
	}
	service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cache.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, service, func() error {
		setLabels(&service.ObjectMeta, name)
		service.Spec.Selector = selectorLabels(name)
		service.Spec.Ports = []corev1.ServicePort{{
			Name:       portName,
			Protocol:   corev1.ProtocolTCP,
			Port:       want.port,
			TargetPort: intstr.FromInt32(want.port),
		}}
		return controllerutil.SetControllerReference(cache, service, r.Scheme)
	}); err != nil {
		return err
	}
	return nil
}

// mutateDeployment sets the fields the operator owns on d, leaving those
// the API server defaulted as they are (so an unchanged Deployment
// compares equal and is not written).
func (want desired) mutateDeployment(d *appsv1.Deployment) {
	name := want.cache.Name
	setLabels(&d.ObjectMeta, name)
	replicas, deadline := want.replicas, want.cache.Spec.timeoutSeconds()
	d.Spec.Replicas = &replicas
	// Kubernetes' own verdict on a rollout: after this long without
	// progress the Deployment controller reports ProgressDeadlineExceeded.
	d.Spec.ProgressDeadlineSeconds = &deadline
	if d.Spec.Selector == nil {
		// Immutable once created.
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorLabels(name)}
	}
	template := &d.Spec.Template
	setLabels(&template.ObjectMeta, name)
	if template.Annotations == nil {
		template.Annotations = map[string]string{}
	}
	template.Annotations[configHashAnnotation] = want.configHash
	if want.pw.hash != "" {
		template.Annotations[secretHashAnnotation] = want.pw.hash
	} else {
		delete(template.Annotations, secretHashAnnotation)
	}

	spec := &template.Spec
	i := -1
	for j := range spec.Containers {
		if spec.Containers[j].Name == containerName {
			i = j
		}
	}
	if i < 0 {
		spec.Containers = append(spec.Containers, corev1.Container{Name: containerName})
		i = len(spec.Containers) - 1
	}
	c := &spec.Containers[i]
	c.Image = want.image
	c.Ports = []corev1.ContainerPort{{Name: portName, ContainerPort: want.port, Protocol: corev1.ProtocolTCP}}
	c.Env = nil
	if want.pw.name != "" {
		c.Env = []corev1.EnvVar{{
			Name: passwordEnv,
			ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: want.pw.name},
				Key:                  want.pw.key,
			}},
		}}
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: configVolume, MountPath: configMountPath, ReadOnly: true}}
	mode := corev1.ConfigMapVolumeSourceDefaultMode
	volume := corev1.Volume{Name: configVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"},
		DefaultMode:          &mode,
	}}}
	for j := range spec.Volumes {
		if spec.Volumes[j].Name == configVolume {
			spec.Volumes[j] = volume
			return
		}
	}
	spec.Volumes = append(spec.Volumes, volume)
}
