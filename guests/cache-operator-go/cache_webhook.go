package cacheoperator

import (
	"fmt"
	"sort"
	"strings"

	wasmop "wasmop.dev/sdk"
)

// DefaultMaxmemoryPolicy is the eviction policy a Cache gets when its
// config names none.
const DefaultMaxmemoryPolicy = "allkeys-lru"

// redisDirectives are the Redis configuration directives a config key may
// name (redis.conf of Redis 7).
var redisDirectives = map[string]bool{}

func init() {
	for _, directive := range strings.Fields(`activedefrag active-defrag-cycle-max active-defrag-cycle-min active-defrag-ignore-bytes
    active-defrag-threshold-lower active-defrag-threshold-upper appendfilename appendfsync appendonly
    auto-aof-rewrite-min-size auto-aof-rewrite-percentage databases dir dbfilename
    hash-max-listpack-entries hash-max-listpack-value hz io-threads latency-monitor-threshold
    lazyfree-lazy-eviction lazyfree-lazy-expire lazyfree-lazy-server-del list-max-listpack-size
    loglevel lua-time-limit maxclients maxmemory maxmemory-policy maxmemory-samples
    min-replicas-max-lag min-replicas-to-write notify-keyspace-events protected-mode
    repl-backlog-size save set-max-intset-entries slowlog-log-slower-than slowlog-max-len
    stop-writes-on-bgsave-error tcp-backlog tcp-keepalive timeout zset-max-listpack-entries
    zset-max-listpack-value`) {
		redisDirectives[directive] = true
	}
}

// Admit defaults and validates a Cache in either version: kubebuilder's
// Default (the mutating call's patch) and ValidateCreate/ValidateUpdate
// (the verdict) in one function, since the host asks twice.
//
// Defaults: spec.image from the setting defaultImage when empty, and the
// directive maxmemory-policy when config sets neither it nor a whole file
// (*.conf). Validation, beyond the CRD's schema: the image names a tag
// other than latest (or a digest), and every config key is a Redis
// directive this guest knows or a *.conf file.
func (r *CacheReconciler) Admit(review *wasmop.Review) wasmop.AdmissionResponse {
	operation := review.Operation()
	object := review.Object()
	if (operation != wasmop.OperationCreate && operation != wasmop.OperationUpdate) || object == nil {
		return wasmop.Allow()
	}
	settings, err := ParseSettings(review.Settings())
	if err != nil {
		return wasmop.Deny(err.Error())
	}
	apiVersion, _ := object["apiVersion"].(string)
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return wasmop.Deny("the Cache has no apiVersion")
	}
	// Read every version in the v1alpha1 shape; patch in the object's own.
	alpha, err := convert(wasmop.DeepCopy(object), group+"/"+V1Alpha1)
	if err != nil {
		return wasmop.Deny(err.Error())
	}
	spec, _ := alpha["spec"].(map[string]any)
	patch := &wasmop.Patch{}
	image, _ := spec["image"].(string)
	if strings.TrimSpace(image) == "" && settings.DefaultImage != "" {
		image = settings.DefaultImage
		patch.Add("/spec/image", image)
	}
	config, hasConfig := spec["config"].(map[string]any)
	keys := make([]string, 0, len(config))
	for key := range config {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	named := false
	for _, key := range keys {
		named = named || key == "maxmemory-policy" || strings.HasSuffix(key, ".conf")
	}
	if !named {
		entry := map[string]any{"name": "maxmemory-policy", "value": DefaultMaxmemoryPolicy}
		switch {
		case version == V1Alpha1 && !hasConfig:
			patch.Add("/spec/config", map[string]any{"maxmemory-policy": DefaultMaxmemoryPolicy})
		case version == V1Alpha1:
			patch.Add("/spec/config/"+wasmop.PointerSegment("maxmemory-policy"), DefaultMaxmemoryPolicy)
		case !hasConfig:
			patch.Add("/spec/config", []any{entry})
		default:
			patch.Add("/spec/config/-", entry)
		}
	}
	if _, ok := object["spec"].(map[string]any); !ok {
		return wasmop.Deny("the Cache has no spec")
	}
	if bad := checkImage(image); bad != "" {
		return wasmop.Deny(bad)
	}
	for _, key := range keys {
		if !strings.HasSuffix(key, ".conf") && !redisDirectives[key] {
			return wasmop.Deny(fmt.Sprintf("spec.config key %s is not a Redis directive this operator knows (nor a *.conf file)", quoted(key)))
		}
	}
	if review.Mutating() {
		return patch.Allow()
	}
	return wasmop.Allow()
}

// checkImage says why image is refused: it names a tag other than latest,
// or a digest.
func checkImage(image string) string {
	if strings.TrimSpace(image) == "" {
		return "spec.image must not be empty (this guest has no setting defaultImage)"
	}
	if strings.Contains(image, "@") {
		return ""
	}
	last := image[strings.LastIndex(image, "/")+1:]
	_, tag, colon := strings.Cut(last, ":")
	switch {
	case !colon:
		return fmt.Sprintf("spec.image %s has no tag: name one (such as redis:7.2), not latest", quoted(image))
	case tag == "latest":
		return fmt.Sprintf("spec.image %s uses the tag latest: name a fixed version", quoted(image))
	case tag == "":
		return fmt.Sprintf("spec.image %s has an empty tag", quoted(image))
	}
	return ""
}
