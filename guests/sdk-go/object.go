package wasmop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Object is a Kubernetes object (or any JSON object) as a generic map.
// Numbers are [json.Number], so an object read and written again keeps
// every number exactly as it was ([Int] reads one as an integer).
type Object = map[string]any

// TypeMeta is the apiVersion and kind of an object, as metav1.TypeMeta
// writes them.
type TypeMeta struct {
	// APIVersion is e.g. "apps/v1".
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind is e.g. "Deployment".
	Kind string `json:"kind,omitempty"`
}

// ObjectMeta is the part of metav1.ObjectMeta a guest reads from its
// parent or sets on a child, with its JSON names. A child carries only
// Name, Labels and Annotations (the host sets the namespace and the
// owner, and refuses anything else); the other fields are read from the
// parent.
type ObjectMeta struct {
	// Name is metadata.name.
	Name string `json:"name,omitempty"`
	// Namespace is metadata.namespace.
	Namespace string `json:"namespace,omitempty"`
	// UID is metadata.uid.
	UID string `json:"uid,omitempty"`
	// Generation is metadata.generation.
	Generation int64 `json:"generation,omitempty"`
	// ResourceVersion is metadata.resourceVersion.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Labels is metadata.labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations is metadata.annotations.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Finalizers is metadata.finalizers.
	Finalizers []string `json:"finalizers,omitempty"`
	// DeletionTimestamp is metadata.deletionTimestamp.
	DeletionTimestamp string `json:"deletionTimestamp,omitempty"`
}

// Lookup is the value at path in obj (map keys, and list indices as
// ints), and whether it is there.
func Lookup(obj any, path ...any) (any, bool) {
	value := obj
	for _, step := range path {
		switch key := step.(type) {
		case string:
			m, ok := value.(map[string]any)
			if !ok {
				return nil, false
			}
			if value, ok = m[key]; !ok {
				return nil, false
			}
		case int:
			list, ok := value.([]any)
			if !ok || key < 0 || key >= len(list) {
				return nil, false
			}
			value = list[key]
		default:
			return nil, false
		}
	}
	return value, true
}

// String is the string at path in obj, and whether there is one.
func String(obj any, path ...any) (string, bool) {
	value, _ := Lookup(obj, path...)
	text, ok := value.(string)
	return text, ok
}

// Int is the integer at path in obj, and whether there is one (a
// [json.Number] or a Go integer; a number with a fraction is none).
func Int(obj any, path ...any) (int64, bool) {
	value, _ := Lookup(obj, path...)
	switch n := value.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case int:
		return int64(n), true
	case int64:
		return n, true
	case int32:
		return int64(n), true
	}
	return 0, false
}

// Map is the object at path in obj, and whether there is one.
func Map(obj any, path ...any) (map[string]any, bool) {
	value, _ := Lookup(obj, path...)
	m, ok := value.(map[string]any)
	return m, ok
}

// parseObject reads text as a JSON object, its numbers as [json.Number].
func parseObject(text, what string) (Object, error) {
	decoder := json.NewDecoder(strings.NewReader(text))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		return nil, fmt.Errorf("%s is not JSON: %w", what, err)
	}
	if decoder.More() {
		return nil, fmt.Errorf("%s is not one JSON value", what)
	}
	object, ok := value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a JSON object", what)
	}
	return object, nil
}

// jsonText is value as compact JSON, with <, > and & as they are (the
// host reads JSON, not HTML).
func jsonText(value any) (string, error) {
	var out bytes.Buffer
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(value); err != nil {
		return "", err
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// DeepCopy is a copy of obj that shares nothing with it.
func DeepCopy(obj Object) Object {
	copied, _ := deepCopy(obj).(map[string]any)
	return copied
}

func deepCopy(value any) any {
	switch v := value.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for key, item := range v {
			out[key] = deepCopy(item)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = deepCopy(item)
		}
		return out
	default:
		return v
	}
}
