package wasmop

import (
	"fmt"
	"strings"
)

// Review is one admission request, its objects parsed once.
//
// The host calls Admit twice per create or update: first with Mutating
// true, where the answer's patch defaults the object (a Defaulter's
// Default), then with the defaulted object and Mutating false, where only
// the verdict counts (a Validator's ValidateCreate and ValidateUpdate).
// Both calls must give the same verdict for the same object, and a patch
// must be idempotent: nothing left to default the second time.
type Review struct {
	wire      AdmissionReview
	object    Object
	oldObject Object
}

// NewReview wraps a request as the host sends it.
func NewReview(wire AdmissionReview) (*Review, error) {
	review := &Review{wire: wire}
	var err error
	if wire.Object != nil {
		if review.object, err = parseObject(*wire.Object, "the object"); err != nil {
			return nil, err
		}
	}
	if wire.OldObject != nil {
		if review.oldObject, err = parseObject(*wire.OldObject, "the old object"); err != nil {
			return nil, err
		}
	}
	return review, nil
}

// ReviewOf is a request for operation of object (tests).
func ReviewOf(operation Operation, object any, mutating bool, settings any) (*Review, error) {
	wire := AdmissionReview{Operation: operation, Mutating: mutating}
	if object != nil {
		text, err := jsonText(object)
		if err != nil {
			return nil, err
		}
		wire.Object = &text
	}
	if settings != nil {
		text, err := jsonText(settings)
		if err != nil {
			return nil, err
		}
		wire.Settings = &text
	}
	return NewReview(wire)
}

// Wire is the request as the host sent it.
func (r *Review) Wire() AdmissionReview { return r.wire }

// Operation is what the request does.
func (r *Review) Operation() Operation { return r.wire.Operation }

// Mutating is true in the defaulting call, false in the validating one.
func (r *Review) Mutating() bool { return r.wire.Mutating }

// Object is the object as it would be stored; nil for a delete.
func (r *Review) Object() Object { return r.object }

// OldObject is the object before the request (updates and deletes).
func (r *Review) OldObject() Object { return r.oldObject }

// Settings are the guest-list entry's settings.
func (r *Review) Settings() Settings { return Settings{text: r.wire.Settings} }

// Allow admits the request unchanged, with warnings shown to the user.
func Allow(warnings ...string) AdmissionResponse {
	return AdmissionResponse{Allowed: true, Warnings: warnings}
}

// Deny denies the request with message, shown to the user (HTTP 403).
func Deny(message string) AdmissionResponse {
	return AdmissionResponse{Message: message}
}

// DenyWithCode denies the request with message and the HTTP error status
// code (400–599).
func DenyWithCode(code uint16, message string) (AdmissionResponse, error) {
	if code < 400 || code > 599 {
		return AdmissionResponse{}, fmt.Errorf("a denial's code is an HTTP error status (400-599), not %d", code)
	}
	return AdmissionResponse{Message: message, Code: &code}, nil
}

// PointerSegment is key as one segment of a JSON pointer (RFC 6901): "~"
// and "/" escaped.
func PointerSegment(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// RefusedPath says why the host would refuse a patch operation at pointer
// (setting value; nil for a removal): what it may not change, or "" when
// it may. A patch may change neither apiVersion, kind, status nor any of
// metadata but labels and annotations (and none of their wasmop.dev/ keys).
func RefusedPath(pointer string, value any, removal bool) (string, error) {
	if pointer != "" && !strings.HasPrefix(pointer, "/") {
		return "", fmt.Errorf("%q is not a JSON pointer (it must start with /)", pointer)
	}
	var segments []string
	if pointer != "" {
		for _, s := range strings.Split(pointer[1:], "/") {
			segments = append(segments, strings.NewReplacer("~1", "/", "~0", "~").Replace(s))
		}
	}
	at := func(i int) (string, bool) {
		if i < len(segments) {
			return segments[i], true
		}
		return "", false
	}
	top, ok := at(0)
	if !ok {
		return "the whole object", nil
	}
	if top == "apiVersion" || top == "kind" || top == "status" {
		return top, nil
	}
	if top != "metadata" {
		return "", nil
	}
	field, ok := at(1)
	if !ok {
		return "metadata", nil
	}
	if field != "labels" && field != "annotations" {
		return "metadata." + field, nil
	}
	key, ok := at(2)
	if !ok {
		if removal {
			return "metadata." + field + " as a whole (remove one key at a time)", nil
		}
		if m, isMap := value.(map[string]any); isMap {
			for k := range m {
				if strings.HasPrefix(k, HostPrefix) {
					return "metadata." + field + "." + k, nil
				}
			}
		}
		if m, isMap := value.(map[string]string); isMap {
			for k := range m {
				if strings.HasPrefix(k, HostPrefix) {
					return "metadata." + field + "." + k, nil
				}
			}
		}
		return "", nil
	}
	if strings.HasPrefix(key, HostPrefix) {
		return "metadata." + field + "." + key, nil
	}
	return "", nil
}

// PatchOperation is one operation of a JSON Patch.
type PatchOperation struct {
	// Op is "add", "replace" or "remove".
	Op string `json:"op"`
	// Path is the JSON pointer it applies to.
	Path string `json:"path"`
	// Value is the value set (add, replace).
	Value any `json:"value,omitempty"`
}

// Patch is a JSON Patch (RFC 6902) built one operation at a time: what a
// Defaulter's changes become. Every path the host would refuse is
// refused as it is added, with a message naming it; the first refusal is
// kept and [Patch.Allow] denies with it.
type Patch struct {
	operations []PatchOperation
	err        error
}

func (p *Patch) push(op PatchOperation, removal bool) *Patch {
	if p.err != nil {
		return p
	}
	refused, err := RefusedPath(op.Path, op.Value, removal)
	if err != nil {
		p.err = err
		return p
	}
	if refused != "" {
		p.err = fmt.Errorf("an admission patch may not change %s (path %s)", refused, op.Path)
		return p
	}
	p.operations = append(p.operations, op)
	return p
}

// Add sets the member at pointer (whose parent must exist) to value.
func (p *Patch) Add(pointer string, value any) *Patch {
	return p.push(PatchOperation{Op: "add", Path: pointer, Value: value}, false)
}

// Replace replaces the member at pointer with value.
func (p *Patch) Replace(pointer string, value any) *Patch {
	return p.push(PatchOperation{Op: "replace", Path: pointer, Value: value}, false)
}

// Remove removes the member at pointer.
func (p *Patch) Remove(pointer string) *Patch {
	return p.push(PatchOperation{Op: "remove", Path: pointer}, true)
}

// Operations are the operations so far.
func (p *Patch) Operations() []PatchOperation { return append([]PatchOperation(nil), p.operations...) }

// Err is the first operation refused, if any.
func (p *Patch) Err() error { return p.err }

// Empty says whether there is nothing to patch.
func (p *Patch) Empty() bool { return len(p.operations) == 0 }

// Allow admits the request with this patch (none when empty), with
// warnings shown to the user; a patch with a refused operation denies it
// instead, naming the operation.
func (p *Patch) Allow(warnings ...string) AdmissionResponse {
	if p.err != nil {
		return Deny(p.err.Error())
	}
	response := Allow(warnings...)
	if len(p.operations) > 0 {
		text, err := jsonText(p.operations)
		if err != nil {
			return Deny(fmt.Sprintf("the patch does not encode as JSON: %v", err))
		}
		response.Patch = &text
	}
	return response
}
