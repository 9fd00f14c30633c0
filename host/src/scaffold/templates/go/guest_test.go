package {{package}}

import (
	"testing"

	wasmop "wasmop.dev/sdk"
)

func TestAParentGetsItsConfigMapAndIsReady(t *testing.T) {
	req, err := wasmop.RequestOf(map[string]any{
		"apiVersion": "{{group}}/v1alpha1",
		"kind":       "{{Kind}}",
		"metadata":   map[string]any{"name": "sample", "generation": 1},
		"spec":       map[string]any{"data": map[string]string{"greeting": "hello"}},
	}, wasmop.RequestParts{Now: 1714564800})
	if err != nil {
		t.Fatal(err)
	}
	response, err := Reconciler{}.Reconcile(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := response.Err(); err != nil {
		t.Fatal(err)
	}
	configMap := response.Children()[0]
	if name, _ := wasmop.String(configMap, "metadata", "name"); name != "sample-data" {
		t.Errorf("the ConfigMap is named %q", name)
	}
	if greeting, _ := wasmop.String(configMap, "data", "greeting"); greeting != "hello" {
		t.Errorf("the ConfigMap holds %q", greeting)
	}
	if status, _ := wasmop.String(response.StatusObject(), "conditions", 0, "status"); status != "True" {
		t.Errorf("Ready is %q", status)
	}
}
