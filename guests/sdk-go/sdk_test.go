package wasmop

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestARequestFindsChildrenByKindAndNameAndParsesEachOnce(t *testing.T) {
	req, err := RequestOf(
		map[string]any{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "a", "generation": 3}},
		RequestParts{
			Observed: []any{
				map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a-data"}, "data": map[string]any{"k": "v"}},
				map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "a"}, "spec": map[string]any{"replicas": 2}},
			},
			Now: 1714564800,
		},
	)
	if err != nil {
		t.Fatal(err)
	}
	if req.Name() != "a" || req.Generation() != 3 || req.Now() != "2024-05-01T12:00:00Z" {
		t.Fatalf("name %q generation %d now %q", req.Name(), req.Generation(), req.Now())
	}
	if got, _ := String(req.Observed(KindConfigMap, "a-data"), "data", "k"); got != "v" {
		t.Errorf("the ConfigMap's data is %q", got)
	}
	if req.Observed(KindConfigMap, "a") != nil {
		t.Error("a ConfigMap named a was found")
	}
	var deployment struct {
		Spec struct {
			Replicas int32 `json:"replicas"`
		} `json:"spec"`
	}
	found, err := req.DecodeObserved(KindDeployment, "a", &deployment)
	if !found || err != nil || deployment.Spec.Replicas != 2 {
		t.Errorf("found %v, err %v, replicas %d", found, err, deployment.Spec.Replicas)
	}
	first := req.Observed(KindConfigMap, "a-data")
	first["marked"] = true
	if req.Observed(KindConfigMap, "a-data")["marked"] != true {
		t.Error("the child was parsed twice")
	}
	if refs := req.ObservedRefs(); len(refs) != 2 || refs[1] != (ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "a"}) {
		t.Errorf("refs %v", refs)
	}
}

func TestAResponseRefusesWhatTheHostRefuses(t *testing.T) {
	for want, child := range map[string]any{
		"has no apiVersion or kind": map[string]any{"metadata": map[string]any{"name": "x"}},
		"has no metadata.name":      map[string]any{"apiVersion": "v1", "kind": "ConfigMap"},
		"sets metadata.ownerReferences": map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "x", "ownerReferences": []any{}}},
		"keys under wasmop.dev/ are the host's": map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "x", "labels": map[string]string{"wasmop.dev/guest": "other"}}},
	} {
		response := NewResponse().Child(child)
		var guest *Error
		if err := response.Err(); !errors.As(err, &guest) || guest.Kind != ErrorPermanent || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, response.Err())
		}
	}
	if err := NewResponse().Normal("not camel", "m").Err(); err == nil {
		t.Error("an Event reason with a space was kept")
	}
	if err := NewResponse().Status([]int{1}).Err(); err == nil {
		t.Error("a status that is not an object was kept")
	}
}

func TestANullCreationTimestampIsLeftOutOfAChild(t *testing.T) {
	response := NewResponse().Child(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x", "creationTimestamp": nil}})
	if response.Err() != nil {
		t.Fatal(response.Err())
	}
	if _, ok := Lookup(response.Children()[0], "metadata", "creationTimestamp"); ok {
		t.Error("creationTimestamp is still there")
	}
}

func TestATransitionTimeMovesOnlyWhenTheStatusDoes(t *testing.T) {
	var conditions []Condition
	if !SetStatusCondition(&conditions, Condition{Type: "Ready", Status: ConditionFalse, Reason: "A", Message: "m"}, "t1") {
		t.Fatal("a new condition changed nothing")
	}
	if SetStatusCondition(&conditions, Condition{Type: "Ready", Status: ConditionFalse, Reason: "A", Message: "m"}, "t2") {
		t.Error("the same condition changed something")
	}
	SetStatusCondition(&conditions, Condition{Type: "Ready", Status: ConditionFalse, Reason: "B", Message: "n", ObservedGeneration: 2}, "t3")
	if c := FindStatusCondition(conditions, "Ready"); c.LastTransitionTime != "t1" || c.Reason != "B" || c.ObservedGeneration != 2 {
		t.Errorf("after a new reason: %+v", c)
	}
	SetStatusCondition(&conditions, Condition{Type: "Ready", Status: ConditionTrue, Reason: "B", Message: "n"}, "t4")
	if c := FindStatusCondition(conditions, "Ready"); c.LastTransitionTime != "t4" || !IsStatusConditionTrue(conditions, "Ready") {
		t.Errorf("after a new status: %+v", c)
	}
}

func TestTheConfigHashIsTheOtherGuestsOne(t *testing.T) {
	// guests/cases/cache-operator: {"maxmemory": "64mb"} on the pod template.
	if got := FNV1a64(CanonicalJSON(map[string]string{"maxmemory": "64mb"})); got != "ea59eebecc7056b9" {
		t.Errorf("hash %s", got)
	}
	if got := CanonicalJSON(map[string]string{"b": "<\"\n\x01é>", "a": ""}); got != `{"a":"","b":"<\"\n\u0001é>"}` {
		t.Errorf("canonical JSON %s", got)
	}
}

func TestAPatchRefusesThePathsTheHostRefuses(t *testing.T) {
	for _, path := range []string{"/status/phase", "/metadata/name", "/metadata/labels/wasmop.dev~1guest", "/kind"} {
		if response := (&Patch{}).Add(path, "x").Allow(); response.Allowed {
			t.Errorf("%s was allowed", path)
		}
	}
	response := (&Patch{}).Add("/spec/a~1b", 1).Add("/metadata/labels/app", "x").Allow("careful")
	if !response.Allowed || response.Patch == nil || *response.Patch != `[{"op":"add","path":"/spec/a~1b","value":1},{"op":"add","path":"/metadata/labels/app","value":"x"}]` {
		t.Errorf("%+v", response)
	}
	if PointerSegment("a/b~c") != "a~1b~0c" {
		t.Error(PointerSegment("a/b~c"))
	}
}

type renamer struct{ field string }

func (r renamer) Convert(object Object, desired string) (Object, error) {
	object["apiVersion"] = desired
	if r.field != "" {
		object["metadata"].(map[string]any)[r.field] = "changed"
	}
	return object, nil
}

func TestAConversionMustKeepTheObjectsIdentity(t *testing.T) {
	objects := []string{`{"apiVersion":"g/v1","kind":"K","metadata":{"name":"a","uid":"u"},"spec":{"n":12345678901234567890}}`}
	out, err := ConvertAll(renamer{}, objects, "g/v2")
	if err != nil || out[0] != `{"apiVersion":"g/v2","kind":"K","metadata":{"name":"a","uid":"u"},"spec":{"n":12345678901234567890}}` {
		t.Fatalf("%v %v", out, err)
	}
	for _, field := range []string{"name", "uid"} {
		if _, err := ConvertAll(renamer{field}, objects, "g/v2"); err == nil || !strings.Contains(err.Error(), "changed metadata."+field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

func TestNativelyEveryRequestIsUnavailable(t *testing.T) {
	_, err := Send("GET", "http://127.0.0.1:9/", nil)
	var httpError *HTTPError
	if !errors.As(err, &httpError) || httpError.Kind != HTTPUnavailable {
		t.Errorf("%v", err)
	}
	if _, err := Send("GET", "ftp://x/", nil); err == nil || !strings.Contains(err.Error(), "invalid URL") {
		t.Errorf("%v", err)
	}
}

func TestAnErrorKeepsItsKindThroughWrapping(t *testing.T) {
	wrapped := fmt.Errorf("reading the spec: %w", Permanent("no image"))
	if e := reconcileError(wrapped); e.Kind != ErrorPermanent || e.Message != "reading the spec: no image" {
		t.Errorf("%+v", e)
	}
	if e := reconcileError(errors.New("boom")); e.Kind != ErrorRetryable {
		t.Errorf("%+v", e)
	}
}

func TestLogLinesAreKeyValue(t *testing.T) {
	if got := line("creating", []any{"name", "demo", "why", "a b"}); got != `creating name=demo why="a b"` {
		t.Error(got)
	}
}

func TestPrepareTakesAnyValueAndChangesNoEncoding(t *testing.T) {
	type withChannel struct {
		Name string        `json:"name"`
		Done chan struct{} `json:"done"`
	}
	type tree struct {
		Name     string  `json:"name"`
		Children []*tree `json:"children,omitempty"`
	}
	// A value that does not encode, a recursive type, nil and a map
	// of interfaces: each is passed over or prepared, none panics.
	Prepare(withChannel{}, tree{}, nil, map[string]any{"a": []any{1}}, func() {})
	var decoded tree
	if err := json.Unmarshal([]byte(`{"name":"a","children":[{"name":"b"}]}`), &decoded); err != nil {
		t.Fatal(err)
	}
	text, err := json.Marshal(decoded)
	if err != nil {
		t.Fatal(err)
	}
	if string(text) != `{"name":"a","children":[{"name":"b"}]}` {
		t.Fatalf("a prepared type encodes as %s", text)
	}
}
