package cacheoperator

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	wasmop "wasmop.dev/sdk"
)

// Settings are the guest-list entry's settings (the Rust guest's
// CacheSettings): the image of a Cache with none, the Cache kind's group,
// the version reconciled and the registry's URL.
type Settings struct {
	DefaultImage string
	APIGroup     string
	Version      string
	RegistryURL  string
}

var (
	settingKeys = []string{"defaultImage", "apiGroup", "version", "registryUrl"}
	apiGroup    = regexp.MustCompile(`^[a-z0-9.-]+$`)
	httpURL     = regexp.MustCompile(`^https?://.`)
)

// ParseSettings checks the settings: unknown keys and empty values are
// refused. registryUrl needs the build with outbound HTTP
// (cache-operator-go-registry), except natively.
func ParseSettings(settings wasmop.Settings) (Settings, error) {
	if !settings.Present() {
		return Settings{Version: V1Alpha1}, nil
	}
	var raw any
	if err := json.Unmarshal([]byte(settings.JSON()), &raw); err != nil {
		return Settings{}, fmt.Errorf("settings are not JSON: %v", err)
	}
	if raw == nil {
		return Settings{Version: V1Alpha1}, nil
	}
	values, ok := raw.(map[string]any)
	if !ok {
		return Settings{}, fmt.Errorf("settings must be a map")
	}
	keys := make([]string, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	text := map[string]string{}
	for _, key := range keys {
		known := false
		for _, k := range settingKeys {
			known = known || k == key
		}
		if !known {
			return Settings{}, fmt.Errorf("unknown setting %q, expected one of %s", key, strings.Join(settingKeys, ", "))
		}
		value, ok := values[key].(string)
		if !ok {
			return Settings{}, fmt.Errorf("settings.%s must be a string", key)
		}
		text[key] = value
	}
	parsed := Settings{DefaultImage: text["defaultImage"], APIGroup: text["apiGroup"], Version: V1Alpha1, RegistryURL: text["registryUrl"]}
	if _, ok := text["defaultImage"]; ok && strings.TrimSpace(parsed.DefaultImage) == "" {
		return Settings{}, fmt.Errorf("settings.defaultImage must not be empty")
	}
	if group, ok := text["apiGroup"]; ok && (!strings.Contains(group, ".") || len(group) > 253 || !apiGroup.MatchString(group)) {
		return Settings{}, fmt.Errorf("settings.apiGroup %s is not an API group (a lowercase DNS name with a dot)", quoted(group))
	}
	if version, ok := text["version"]; ok {
		if version != V1Alpha1 && version != V1Beta1 {
			return Settings{}, fmt.Errorf("settings.version %s is not a Cache version (v1alpha1 or v1beta1)", quoted(version))
		}
		parsed.Version = version
	}
	if url, ok := text["registryUrl"]; ok {
		if inComponent && !wasmop.HTTPAvailable() {
			return Settings{}, fmt.Errorf("settings.registryUrl needs the cache-operator-go-registry build, which imports outbound HTTP")
		}
		if !httpURL.MatchString(url) || strings.ContainsAny(url, "?#@") {
			return Settings{}, fmt.Errorf("settings.registryUrl %s must be an http:// or https:// URL without user info or query", quoted(url))
		}
	}
	return parsed, nil
}

// group is the Cache kind's API group.
func (s Settings) group() string {
	if s.APIGroup != "" {
		return s.APIGroup
	}
	return Group
}

// quoted is text as a JSON string, as the other guests quote it.
func quoted(text string) string {
	var out strings.Builder
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	_ = encoder.Encode(text)
	return strings.TrimSuffix(out.String(), "\n")
}
