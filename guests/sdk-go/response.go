package wasmop

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// HostPrefix is the prefix of the labels and annotations that are the
// host's; a guest sets none.
const HostPrefix = "wasmop.dev/"

// childMetadata is the metadata a child may carry: the host sets the
// namespace, the owner and its own labels, and refuses anything else.
var childMetadata = map[string]bool{"name": true, "namespace": true, "labels": true, "annotations": true}

// Response is one reconcile's answer: the children that should exist, the
// parent's status, Events, the children to keep as they are, a requeue
// and, while the parent is deleted, whether cleanup is complete.
//
// Each child and the status are encoded to JSON as they are added, and
// checked as the host will check them: a child that the host would refuse
// (no apiVersion, kind or metadata.name, metadata other than name,
// namespace, labels and annotations, a key under wasmop.dev/) or an Event
// reason that is not CamelCase is refused here, with a message naming it.
// The methods chain; the first refusal is kept, [Response.Err] returns
// it, and the SDK answers it as a permanent error instead of the response.
type Response struct {
	children  []string
	status    *string
	requeue   *uint32
	finalized bool
	events    []Event
	keep      []ObjectRef
	err       error
}

// NewResponse is an empty answer: no children, the status left alone.
func NewResponse() *Response { return &Response{} }

func (r *Response) fail(err error) *Response {
	if r.err == nil {
		r.err = err
	}
	return r
}

// Err is the first thing this response refused, if any.
func (r *Response) Err() error { return r.err }

// Child adds a desired child: any value that encodes to a Kubernetes
// object (a struct of the guest's own, an [Object]). A null
// metadata.creationTimestamp, which k8s.io/apimachinery's ObjectMeta
// always writes, is left out.
func (r *Response) Child(object any) *Response {
	text, err := jsonText(object)
	if err != nil {
		return r.fail(Permanentf("a child does not encode as JSON: %v", err))
	}
	text, err = checkChild(text)
	if err != nil {
		return r.fail(err)
	}
	r.children = append(r.children, text)
	return r
}

// RawChild adds a child as text the SDK passes to the host unchanged,
// unchecked: the hostile test guest's way to send what the host must
// refuse. A real guest has no use for it.
func (r *Response) RawChild(text string) *Response {
	r.children = append(r.children, text)
	return r
}

// childHead is what checkChild reads of a child.
type childHead struct {
	APIVersion any                        `json:"apiVersion"`
	Kind       any                        `json:"kind"`
	Metadata   map[string]json.RawMessage `json:"metadata"`
}

func checkChild(text string) (string, error) {
	var head childHead
	if err := json.Unmarshal([]byte(text), &head); err != nil {
		return "", Permanentf("a child is not a JSON object: %v", err)
	}
	kind, _ := head.Kind.(string)
	var name string
	_ = json.Unmarshal(head.Metadata["name"], &name)
	what := fmt.Sprintf("a child %s %s", orNone(kind, "(no kind)"), orNone(name, "(no name)"))
	if _, ok := head.APIVersion.(string); !ok || kind == "" {
		return "", Permanentf("%s has no apiVersion or kind", what)
	}
	if name == "" {
		return "", Permanentf("%s has no metadata.name", what)
	}
	if string(head.Metadata["creationTimestamp"]) == "null" {
		object, err := parseObject(text, what)
		if err != nil {
			return "", Permanent(err.Error())
		}
		metadata, _ := object["metadata"].(map[string]any)
		delete(metadata, "creationTimestamp")
		delete(head.Metadata, "creationTimestamp")
		if text, err = jsonText(object); err != nil {
			return "", Permanentf("%s does not encode: %v", what, err)
		}
	}
	fields := make([]string, 0, len(head.Metadata))
	for field := range head.Metadata {
		fields = append(fields, field)
	}
	sort.Strings(fields)
	for _, field := range fields {
		if !childMetadata[field] {
			return "", Permanentf("%s sets metadata.%s: a guest sets only name, namespace, labels and annotations (the host sets the owner)", what, field)
		}
	}
	for _, field := range []string{"labels", "annotations"} {
		var keys map[string]any
		_ = json.Unmarshal(head.Metadata[field], &keys)
		for key := range keys {
			if strings.HasPrefix(key, HostPrefix) {
				return "", Permanentf("%s sets %s: keys under %s are the host's", what, key, HostPrefix)
			}
		}
	}
	return text, nil
}

func orNone(text, none string) string {
	if text == "" {
		return none
	}
	return text
}

// Status sets the parent's desired .status (a value that encodes to a
// JSON object); the host adds observedGeneration.
func (r *Response) Status(status any) *Response {
	text, err := jsonText(status)
	if err != nil {
		return r.fail(Permanentf("the status does not encode as JSON: %v", err))
	}
	if !strings.HasPrefix(text, "{") {
		return r.fail(Permanentf("the status is not a JSON object: %s", text))
	}
	r.status = &text
	return r
}

// RequeueAfter asks to be called again after d (whole seconds) even if
// nothing changes: ctrl.Result{RequeueAfter: d}.
func (r *Response) RequeueAfter(d time.Duration) *Response {
	seconds := uint32(0)
	if d > 0 {
		seconds = uint32(min(d/time.Second, 1<<32-1))
	}
	r.requeue = &seconds
	return r
}

// Finalize says, on the deletion path, that cleanup is complete: the host
// removes the finalizer.
func (r *Response) Finalize() *Response {
	r.finalized = true
	return r
}

// Event records an Event on the parent, as an EventRecorder would:
// reason CamelCase (a letter, then letters and digits, at most 128).
func (r *Response) Event(eventType EventType, reason, message string) *Response {
	if !isReason(reason) {
		return r.fail(Permanentf("the Event reason %q is not CamelCase (a letter, then letters and digits, at most 128)", reason))
	}
	r.events = append(r.events, Event{Type: eventType, Reason: reason, Message: message})
	return r
}

// Normal records a Normal Event on the parent.
func (r *Response) Normal(reason, message string) *Response {
	return r.Event(EventNormal, reason, message)
}

// Warning records a Warning Event on the parent.
func (r *Response) Warning(reason, message string) *Response {
	return r.Event(EventWarning, reason, message)
}

func isReason(reason string) bool {
	if reason == "" || len(reason) > 128 {
		return false
	}
	for i, c := range reason {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Keep leaves the observed child ref exactly as it is: the host neither
// writes nor prunes it (a paused parent, a child kept during cleanup).
func (r *Response) Keep(ref ObjectRef) *Response {
	r.keep = append(r.keep, ref)
	return r
}

// KeepObserved keeps every observed child of request except those for
// which except is true (nil: none).
func (r *Response) KeepObserved(request *Request, except func(ObjectRef) bool) *Response {
	for _, ref := range request.ObservedRefs() {
		if except == nil || !except(ref) {
			r.keep = append(r.keep, ref)
		}
	}
	return r
}

// Wire is the answer in the contract's shape.
func (r *Response) Wire() ReconcileResponse {
	return ReconcileResponse{
		Children:            append([]string(nil), r.children...),
		Status:              r.status,
		RequeueAfterSeconds: r.requeue,
		Finalized:           r.finalized,
		Events:              append([]Event(nil), r.events...),
		Keep:                append([]ObjectRef(nil), r.keep...),
	}
}

// Children are the desired children parsed back (tests).
func (r *Response) Children() []Object {
	out := make([]Object, 0, len(r.children))
	for _, text := range r.children {
		object, _ := parseObject(text, "a child")
		out = append(out, object)
	}
	return out
}

// StatusObject is the desired status parsed back, or nil (tests).
func (r *Response) StatusObject() Object {
	if r.status == nil {
		return nil
	}
	object, _ := parseObject(*r.status, "the status")
	return object
}

// Events are the Events so far (tests).
func (r *Response) Events() []Event { return append([]Event(nil), r.events...) }

// Kept are the observed children kept so far (tests).
func (r *Response) Kept() []ObjectRef { return append([]ObjectRef(nil), r.keep...) }

// Finalized says whether the response finalizes the parent (tests).
func (r *Response) Finalized() bool { return r.finalized }

// Requeue is the requeue asked for, in seconds, if any (tests).
func (r *Response) Requeue() (uint32, bool) {
	if r.requeue == nil {
		return 0, false
	}
	return *r.requeue, true
}
