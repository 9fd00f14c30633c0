package wasmop

import (
	"fmt"
	"reflect"
)

// identity is what a conversion must keep of an object's metadata.
var identity = []string{"name", "namespace", "uid", "resourceVersion", "generation"}

// ConvertAll converts every object of one request (JSON text) to
// desiredAPIVersion through converter, in order, and checks each answer
// against the object it came from, before the host does: the desired
// apiVersion, the same kind, and the same name, namespace, uid,
// resourceVersion and generation. The first failure fails the request.
func ConvertAll(converter Converter, objects []string, desiredAPIVersion string) ([]string, error) {
	out := make([]string, 0, len(objects))
	for i, text := range objects {
		object, err := parseObject(text, fmt.Sprintf("object %d", i))
		if err != nil {
			return nil, err
		}
		// The converter may change the object it is given: what it must
		// keep is read first.
		kind := object["kind"]
		before := identityOf(object)
		converted, err := converter.Convert(object, desiredAPIVersion)
		if err != nil {
			return nil, err
		}
		if apiVersion, _ := converted["apiVersion"].(string); apiVersion != desiredAPIVersion {
			return nil, fmt.Errorf("object %d was converted to apiVersion %v, not %s", i, converted["apiVersion"], desiredAPIVersion)
		}
		if !reflect.DeepEqual(converted["kind"], kind) {
			return nil, fmt.Errorf("object %d changed its kind", i)
		}
		after := identityOf(converted)
		for j, key := range identity {
			if !reflect.DeepEqual(before[j], after[j]) {
				return nil, fmt.Errorf("object %d changed metadata.%s", i, key)
			}
		}
		text, err := jsonText(converted)
		if err != nil {
			return nil, fmt.Errorf("object %d does not encode as JSON: %w", i, err)
		}
		out = append(out, text)
	}
	return out, nil
}

func identityOf(object Object) []any {
	metadata, _ := object["metadata"].(map[string]any)
	values := make([]any, len(identity))
	for i, key := range identity {
		values[i] = metadata[key]
	}
	return values
}
