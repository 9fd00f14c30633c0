package cacheoperator

import (
	"testing"

	wasmop "wasmop.dev/sdk"
)

func newCache() map[string]any {
	return map[string]any{
		"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
		"metadata": map[string]any{"name": "demo", "namespace": "default", "uid": "u-1", "generation": 2},
		"spec":     map[string]any{"image": "redis:7.2", "replicas": 2, "config": map[string]any{"maxmemory": "64mb"}},
	}
}

func TestANewCacheGetsItsChildrenAndIsPending(t *testing.T) {
	req, err := wasmop.RequestOf(newCache(), wasmop.RequestParts{Now: 1714564800})
	if err != nil {
		t.Fatal(err)
	}
	response, err := (&CacheReconciler{}).Reconcile(req)
	if err != nil || response.Err() != nil {
		t.Fatal(err, response.Err())
	}
	children := response.Children()
	if len(children) != 3 {
		t.Fatalf("%d children", len(children))
	}
	if hash, _ := wasmop.String(children[1], "spec", "template", "metadata", "annotations", ConfigHashAnnotation); hash != "ea59eebecc7056b9" {
		t.Errorf("config hash %q", hash)
	}
	if phase, _ := wasmop.String(response.StatusObject(), "phase"); phase != PhasePending {
		t.Errorf("phase %q", phase)
	}
	if events := response.Events(); len(events) != 2 || events[0].Reason != "Created" {
		t.Errorf("events %+v", events)
	}
}

func TestAReconcileOfAConvergedCacheIsTheSameAnswer(t *testing.T) {
	first, _ := wasmop.RequestOf(newCache(), wasmop.RequestParts{Now: 1714564800})
	answer, _ := (&CacheReconciler{}).Reconcile(first)
	cache := newCache()
	cache["status"] = answer.StatusObject()
	again, _ := wasmop.RequestOf(cache, wasmop.RequestParts{Now: 1714564900})
	second, _ := (&CacheReconciler{}).Reconcile(again)
	a, _ := jsonOf(answer.StatusObject())
	b, _ := jsonOf(second.StatusObject())
	if string(a) != string(b) {
		t.Errorf("the status moved:\n%s\n%s", a, b)
	}
}

func TestTooManyReplicasArePermanent(t *testing.T) {
	cache := newCache()
	cache["spec"].(map[string]any)["replicas"] = 11
	req, _ := wasmop.RequestOf(cache, wasmop.RequestParts{})
	_, err := (&CacheReconciler{}).Reconcile(req)
	if e, ok := err.(*wasmop.Error); !ok || e.Kind != wasmop.ErrorPermanent || e.Message != "spec.replicas must be between 1 and 10, got 11" {
		t.Errorf("%v", err)
	}
}

func TestARoundTripThroughV1beta1KeepsTheCache(t *testing.T) {
	cache := newCache()
	cache["spec"].(map[string]any)["port"] = 6380
	up, err := convert(wasmop.DeepCopy(cache), "apps.example.com/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	if client, _ := wasmop.Int(up, "spec", "ports", "client"); client != 6380 {
		t.Errorf("ports.client %d", client)
	}
	back, err := convert(up, "apps.example.com/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := jsonOf(cache)
	b, _ := jsonOf(back)
	if string(a) != string(b) {
		t.Errorf("\n%s\n%s", a, b)
	}
}

func TestAdmissionDefaultsThePolicyAndRefusesLatest(t *testing.T) {
	review, _ := wasmop.ReviewOf(wasmop.OperationCreate, newCache(), true, nil)
	response := (&CacheReconciler{}).Admit(review)
	if !response.Allowed || response.Patch == nil || *response.Patch != `[{"op":"add","path":"/spec/config/maxmemory-policy","value":"allkeys-lru"}]` {
		t.Errorf("%+v", response)
	}
	cache := newCache()
	cache["spec"].(map[string]any)["image"] = "redis:latest"
	review, _ = wasmop.ReviewOf(wasmop.OperationCreate, cache, false, nil)
	if response := (&CacheReconciler{}).Admit(review); response.Allowed {
		t.Error("redis:latest was admitted")
	}
}
