package cacheoperator

import (
	"fmt"
	"sort"
	"strings"

	wasmop "wasmop.dev/sdk"
)

// The Cache's two versions. v1alpha1 is the seeds' shape: spec.port, and
// spec.config as a map of names to values. v1beta1 (the stored version,
// kubebuilder's hub) has spec.ports.client, and spec.config as a list of
// {name, value} sorted by name. Everything else (metadata, status, the
// other spec fields, fields this guest does not know) is carried as it
// is, so a round trip gives back the same object: the conversion works on
// the object as JSON, not on typed structs that would drop what they do
// not name.
const (
	V1Alpha1 = "v1alpha1"
	V1Beta1  = "v1beta1"
)

// Convert is object (a Cache in either version) in desiredAPIVersion: the
// conversion webhook's ConvertTo and ConvertFrom in one function.
func (r *CacheReconciler) Convert(object wasmop.Object, desiredAPIVersion string) (wasmop.Object, error) {
	return convert(object, desiredAPIVersion)
}

func convert(object wasmop.Object, desiredAPIVersion string) (wasmop.Object, error) {
	group, desired, ok := strings.Cut(desiredAPIVersion, "/")
	if !ok {
		return nil, fmt.Errorf("%s is not <group>/<version>", quoted(desiredAPIVersion))
	}
	apiVersion, _ := object["apiVersion"].(string)
	currentGroup, current, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return nil, fmt.Errorf("the object has no apiVersion <group>/<version>")
	}
	if currentGroup != group {
		return nil, fmt.Errorf("cannot convert a Cache of group %s to group %s", currentGroup, group)
	}
	spec, _ := object["spec"].(map[string]any)
	switch {
	case current == V1Alpha1 && desired == V1Beta1:
		if spec != nil {
			if err := up(spec); err != nil {
				return nil, err
			}
		}
	case current == V1Beta1 && desired == V1Alpha1:
		if spec != nil {
			if err := down(spec); err != nil {
				return nil, err
			}
		}
	case current == desired && (current == V1Alpha1 || current == V1Beta1):
	default:
		return nil, fmt.Errorf("cannot convert a Cache from %s to %s", current, desired)
	}
	object["apiVersion"] = desiredAPIVersion
	return object, nil
}

// up is the v1alpha1 spec as v1beta1, in place (ConvertTo the hub).
func up(spec map[string]any) error {
	if port, ok := spec["port"]; ok {
		delete(spec, "port")
		spec["ports"] = map[string]any{"client": port}
	}
	if raw, ok := spec["config"]; ok {
		config, isMap := raw.(map[string]any)
		if !isMap {
			return fmt.Errorf("v1alpha1 spec.config must be a map")
		}
		names := make([]string, 0, len(config))
		for name := range config {
			names = append(names, name)
		}
		sort.Strings(names)
		entries := make([]any, 0, len(names))
		for _, name := range names {
			entries = append(entries, map[string]any{"name": name, "value": config[name]})
		}
		spec["config"] = entries
	}
	return nil
}

// down is the v1beta1 spec as v1alpha1, in place (ConvertFrom the hub).
func down(spec map[string]any) error {
	if raw, ok := spec["ports"]; ok {
		ports, isMap := raw.(map[string]any)
		if !isMap {
			return fmt.Errorf("v1beta1 spec.ports must be an object")
		}
		delete(spec, "ports")
		rest := make([]string, 0, len(ports))
		for name, port := range ports {
			if name == "client" {
				spec["port"] = port
			} else {
				rest = append(rest, name)
			}
		}
		if len(rest) > 0 {
			sort.Strings(rest)
			return fmt.Errorf("v1beta1 spec.ports.%s has no v1alpha1 equivalent", rest[0])
		}
	}
	if raw, ok := spec["config"]; ok {
		entries, isList := raw.([]any)
		if !isList {
			return fmt.Errorf("v1beta1 spec.config must be a list")
		}
		config := map[string]any{}
		for _, item := range entries {
			entry, _ := item.(map[string]any)
			name, ok := entry["name"].(string)
			if !ok {
				return fmt.Errorf("every v1beta1 spec.config entry needs a name")
			}
			if _, twice := config[name]; twice {
				return fmt.Errorf("v1beta1 spec.config names %s twice", quoted(name))
			}
			value, ok := entry["value"]
			if !ok {
				value = ""
			}
			config[name] = value
		}
		spec["config"] = config
	}
	return nil
}
