package cacheoperator

import (
	"regexp"
	"sort"
	"strings"

	"example.com/cache-operator/api/v1alpha1"
	wasmop "wasmop.dev/sdk"
)

// Defaults and bounds of the spec (the CRD's).
const (
	DefaultReplicas              = 1
	DefaultPort                  = 6379
	MaxReplicas                  = 10
	DefaultUpgradeTimeoutSeconds = 300
	MinUpgradeTimeoutSeconds     = 30
	MaxUpgradeTimeoutSeconds     = 3600
)

var configKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// cacheSpec is the spec with its defaults applied.
type cacheSpec struct {
	Image                 string
	Auth                  *v1alpha1.SecretKeyRef
	Replicas              int32
	Port                  int32
	Config                map[string]string
	Paused                bool
	UpgradeTimeoutSeconds int32
}

func specOf(cache *v1alpha1.Cache, settings Settings) cacheSpec {
	spec := cacheSpec{
		Image:                 cache.Spec.Image,
		Replicas:              DefaultReplicas,
		Port:                  DefaultPort,
		Config:                cache.Spec.Config,
		Paused:                cache.Spec.Paused,
		UpgradeTimeoutSeconds: DefaultUpgradeTimeoutSeconds,
	}
	if strings.TrimSpace(spec.Image) == "" && settings.DefaultImage != "" {
		spec.Image = settings.DefaultImage
	}
	if cache.Spec.Auth != nil {
		ref := cache.Spec.Auth.SecretRef
		spec.Auth = &ref
	}
	if cache.Spec.Replicas != nil {
		spec.Replicas = *cache.Spec.Replicas
	}
	if cache.Spec.Port != nil {
		spec.Port = *cache.Spec.Port
	}
	if cache.Spec.Upgrade != nil && cache.Spec.Upgrade.TimeoutSeconds != nil {
		spec.UpgradeTimeoutSeconds = *cache.Spec.Upgrade.TimeoutSeconds
	}
	return spec
}

func isConfigMapKey(key string) bool {
	return len(key) > 0 && len(key) <= 253 && key != "." && key != ".." && configKey.MatchString(key)
}

// validate refuses a spec no retry can fix.
func (s cacheSpec) validate() error {
	if strings.TrimSpace(s.Image) == "" {
		return wasmop.Permanent("spec.image must not be empty (this guest has no setting defaultImage)")
	}
	if s.Auth != nil {
		if s.Auth.Name == "" || len(s.Auth.Name) > 253 {
			return wasmop.Permanent("spec.auth.secretRef.name must be 1 to 253 characters")
		}
		if !isConfigMapKey(s.Auth.Key) {
			return wasmop.Permanentf("spec.auth.secretRef.key %s is not a valid Secret key", quoted(s.Auth.Key))
		}
	}
	if s.Replicas < 1 || s.Replicas > MaxReplicas {
		return wasmop.Permanentf("spec.replicas must be between 1 and %d, got %d", MaxReplicas, s.Replicas)
	}
	if s.Port < 1 || s.Port > 65535 {
		return wasmop.Permanentf("spec.port must be between 1 and 65535, got %d", s.Port)
	}
	if s.UpgradeTimeoutSeconds < MinUpgradeTimeoutSeconds || s.UpgradeTimeoutSeconds > MaxUpgradeTimeoutSeconds {
		return wasmop.Permanentf("spec.upgrade.timeoutSeconds must be between %d and %d, got %d",
			MinUpgradeTimeoutSeconds, MaxUpgradeTimeoutSeconds, s.UpgradeTimeoutSeconds)
	}
	for _, key := range sortedKeys(s.Config) {
		if !isConfigMapKey(key) {
			return wasmop.Permanentf("spec.config key %q is not a valid file name (letters, digits, '-', '_' and '.', at most 253 characters)", key)
		}
	}
	return nil
}

// configHash is the 64-bit FNV-1a hash of the config as sorted compact
// JSON: the Rust guest's, so a swap of one for the other rolls no pod.
func configHash(config map[string]string) string {
	if config == nil {
		config = map[string]string{}
	}
	return wasmop.FNV1a64(wasmop.CanonicalJSON(config))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// fingerprint is what the Deployment's spec asks for: replicas, image,
// port, config hash and secret hash (-1 and "" where there is none).
type fingerprint struct {
	replicas   int64
	image      string
	port       int64
	configHash string
	secretHash string
}

func (s cacheSpec) fingerprint(configHash, secretHash string) fingerprint {
	return fingerprint{
		replicas:   int64(s.Replicas),
		image:      s.Image,
		port:       int64(s.Port),
		configHash: configHash,
		secretHash: secretHash,
	}
}
