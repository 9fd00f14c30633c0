package cacheoperator

import (
	"example.com/cache-operator/api/v1alpha1"
	"example.com/cache-operator/k8s/corev1"
	wasmop "wasmop.dev/sdk"
)

// spec.auth.secretRef: the Secret key holding the cache server's password,
// a related object. The host hands the guest the Secret the Cache names
// (concealed: each value's SHA-256 unless the guest list says
// secretValues) and reconciles the Cache when it appears, changes or goes.
// The password reaches the pods through valueFrom.secretKeyRef; the guest
// only needs to know that the key exists and a hash of its value.
const (
	// SecretNamePointer is where a Cache names its Secret.
	SecretNamePointer = "/spec/auth/secretRef/name"
	// SecretHashAnnotation holds the hash of the password's value on the
	// pod template (a rotation rolls the pods).
	SecretHashAnnotation = "apps.example.com/secret-hash"
	// PasswordEnv is the environment variable the pods get it in.
	PasswordEnv = "CACHE_PASSWORD"
)

// secretState is the password spec.auth asks for: none, found (name, key
// and the hash of its value) or missing (why).
type secretState struct {
	name, key, hash string
	missing         string
}

func password(req *wasmop.Request, ref *v1alpha1.SecretKeyRef) secretState {
	if ref == nil {
		return secretState{}
	}
	var secret corev1.Secret
	found, err := req.DecodeRelated(wasmop.KindSecret, ref.Name, &secret)
	if err != nil || !found {
		return secretState{missing: "Secret " + ref.Name + " (key " + ref.Key + ") does not exist in the Cache's namespace"}
	}
	value, ok := secret.Data[ref.Key]
	if !ok {
		return secretState{missing: "Secret " + ref.Name + " has no key " + ref.Key}
	}
	return secretState{name: ref.Name, key: ref.Key, hash: wasmop.FNV1a64(value)}
}
