package wasmop

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Request is one reconcile's input: the parent, the children the host
// observes for it and the related objects that map to it. Each object
// stays JSON text until it is asked for, and is then parsed once: a
// reconcile that decodes the parent into its own type ([Request.DecodeParent])
// and reads one child parses nothing else.
//
// An object the host sent that is not a JSON object (the host sends none)
// reads as nil, and the reconcile fails as permanent with its reason.
type Request struct {
	wire     ReconcileRequest
	parent   lazyObject
	observed []lazyObject
	related  []lazyObject
	failure  error
}

// lazyObject is one object's text, and its parsed form once asked for.
type lazyObject struct {
	ref    ObjectRef
	text   string
	what   string
	value  Object
	parsed bool
}

// NewRequest wraps a request as the host sends it.
func NewRequest(wire ReconcileRequest) *Request {
	lazy := func(list []ObservedObject, role string) []lazyObject {
		out := make([]lazyObject, len(list))
		for i, o := range list {
			out[i] = lazyObject{
				ref:  ObjectRef{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name},
				text: o.Object,
				what: fmt.Sprintf("the %s %s %s", role, o.Kind, o.Name),
			}
		}
		return out
	}
	return &Request{
		wire:     wire,
		parent:   lazyObject{text: wire.Parent, what: "the parent"},
		observed: lazy(wire.Observed, "observed"),
		related:  lazy(wire.Related, "related"),
	}
}

// RequestParts is what [RequestOf] builds a request from beside its parent.
type RequestParts struct {
	// Observed are the observed children, as any JSON-encodable values.
	Observed []any
	// Related are the related objects.
	Related []any
	// Deleting says the parent is being deleted.
	Deleting bool
	// Now is the host's time in Unix seconds.
	Now uint64
	// Settings are the entry's settings (encoded as JSON); nil for none.
	Settings any
}

// RequestOf is a request as the host would send it for parent and parts:
// what a guest's unit tests hand to its Reconcile.
func RequestOf(parent any, parts RequestParts) (*Request, error) {
	wire, err := WireRequest(parent, parts)
	if err != nil {
		return nil, err
	}
	return NewRequest(wire), nil
}

// WireRequest is the contract's request for parent and parts, each object
// with its identity read out as the host reads it.
func WireRequest(parent any, parts RequestParts) (ReconcileRequest, error) {
	parentText, err := jsonText(parent)
	if err != nil {
		return ReconcileRequest{}, fmt.Errorf("encoding the parent: %w", err)
	}
	observed, err := observedWire(parts.Observed)
	if err != nil {
		return ReconcileRequest{}, err
	}
	related, err := observedWire(parts.Related)
	if err != nil {
		return ReconcileRequest{}, err
	}
	var settings *string
	if parts.Settings != nil {
		text, err := jsonText(parts.Settings)
		if err != nil {
			return ReconcileRequest{}, fmt.Errorf("encoding the settings: %w", err)
		}
		settings = &text
	}
	return ReconcileRequest{
		Parent:   parentText,
		Observed: observed,
		Deleting: parts.Deleting,
		Now:      parts.Now,
		Settings: settings,
		Related:  related,
	}, nil
}

func observedWire(objects []any) ([]ObservedObject, error) {
	out := make([]ObservedObject, 0, len(objects))
	for _, object := range objects {
		text, err := jsonText(object)
		if err != nil {
			return nil, fmt.Errorf("encoding an object: %w", err)
		}
		var head struct {
			APIVersion any `json:"apiVersion"`
			Kind       any `json:"kind"`
			Metadata   struct {
				Name any `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(text), &head); err != nil {
			return nil, fmt.Errorf("an object is not a JSON object: %w", err)
		}
		str := func(v any) string { s, _ := v.(string); return s }
		out = append(out, ObservedObject{
			APIVersion: str(head.APIVersion),
			Kind:       str(head.Kind),
			Name:       str(head.Metadata.Name),
			Object:     text,
		})
	}
	return out, nil
}

// Wire is the request as the host sent it.
func (r *Request) Wire() ReconcileRequest { return r.wire }

// Err is why an object of the request could not be read, if one could not.
func (r *Request) Err() error { return r.failure }

func (r *Request) value(o *lazyObject) Object {
	if !o.parsed {
		o.parsed = true
		value, err := parseObject(o.text, o.what)
		if err != nil && r.failure == nil {
			r.failure = Permanent(err.Error())
		}
		o.value = value
	}
	return o.value
}

func (r *Request) decode(o *lazyObject, into any) error {
	if err := json.Unmarshal([]byte(o.text), into); err != nil {
		return Permanentf("%s does not decode: %v", o.what, err)
	}
	return nil
}

// Parent is the parent object.
func (r *Request) Parent() Object { return r.value(&r.parent) }

// DecodeParent decodes the parent into into (the guest's own type, such
// as a Cache struct), straight from its text. A parent that does not fit
// is a permanent error naming the field.
func (r *Request) DecodeParent(into any) error { return r.decode(&r.parent, into) }

// Name is the parent's metadata.name ("" when it has none).
func (r *Request) Name() string {
	name, _ := String(r.Parent(), "metadata", "name")
	return name
}

// Namespace is the parent's metadata.namespace ("" when it has none).
func (r *Request) Namespace() string {
	namespace, _ := String(r.Parent(), "metadata", "namespace")
	return namespace
}

// Generation is the parent's metadata.generation (0 when it has none).
func (r *Request) Generation() int64 {
	generation, _ := Int(r.Parent(), "metadata", "generation")
	return generation
}

// Status is the parent's .status, if it has one.
func (r *Request) Status() (Object, bool) { return Map(r.Parent(), "status") }

// Deleting is true once the parent is being deleted (guests with a
// finalizer only).
func (r *Request) Deleting() bool { return r.wire.Deleting }

// Now is the host's time for this call as Kubernetes writes times:
// "2024-05-01T12:00:00Z". A guest has no clock of its own: it stamps
// condition transition times with this.
func (r *Request) Now() string { return RFC3339(r.wire.Now) }

// NowUnix is the host's time for this call in seconds since the epoch.
func (r *Request) NowUnix() uint64 { return r.wire.Now }

// Settings are the guest-list entry's settings.
func (r *Request) Settings() Settings { return Settings{text: r.wire.Settings} }

func find(list []lazyObject, kind KindRef, name string) int {
	apiVersion := kind.APIVersion()
	for i := range list {
		ref := list[i].ref
		if ref.APIVersion == apiVersion && ref.Kind == kind.Kind && ref.Name == name {
			return i
		}
	}
	return -1
}

// Observed is the observed child of kind named name, or nil.
func (r *Request) Observed(kind KindRef, name string) Object {
	if i := find(r.observed, kind, name); i >= 0 {
		return r.value(&r.observed[i])
	}
	return nil
}

// DecodeObserved decodes the observed child of kind named name into into
// and says whether there is one.
func (r *Request) DecodeObserved(kind KindRef, name string, into any) (bool, error) {
	i := find(r.observed, kind, name)
	if i < 0 {
		return false, nil
	}
	return true, r.decode(&r.observed[i], into)
}

// ObservedOf is every observed child of kind.
func (r *Request) ObservedOf(kind KindRef) []Object {
	return r.of(r.observed, kind)
}

// ObservedRefs names every observed child.
func (r *Request) ObservedRefs() []ObjectRef {
	refs := make([]ObjectRef, len(r.observed))
	for i, o := range r.observed {
		refs[i] = o.ref
	}
	return refs
}

// Related is the related object of kind named name, or nil.
func (r *Request) Related(kind KindRef, name string) Object {
	if i := find(r.related, kind, name); i >= 0 {
		return r.value(&r.related[i])
	}
	return nil
}

// DecodeRelated decodes the related object of kind named name into into
// and says whether there is one.
func (r *Request) DecodeRelated(kind KindRef, name string, into any) (bool, error) {
	i := find(r.related, kind, name)
	if i < 0 {
		return false, nil
	}
	return true, r.decode(&r.related[i], into)
}

// RelatedOf is every related object of kind.
func (r *Request) RelatedOf(kind KindRef) []Object {
	return r.of(r.related, kind)
}

func (r *Request) of(list []lazyObject, kind KindRef) []Object {
	apiVersion := kind.APIVersion()
	var out []Object
	for i := range list {
		if list[i].ref.APIVersion == apiVersion && list[i].ref.Kind == kind.Kind {
			out = append(out, r.value(&list[i]))
		}
	}
	return out
}

// Settings are the guest-list entry's settings (any YAML value, as JSON).
type Settings struct {
	text *string
}

// SettingsOf are settings given as JSON text; nil for none.
func SettingsOf(text *string) Settings { return Settings{text: text} }

// Present says whether the entry has settings.
func (s Settings) Present() bool { return s.text != nil }

// JSON is the settings' JSON text ("" when there are none).
func (s Settings) JSON() string {
	if s.text == nil {
		return ""
	}
	return *s.text
}

// Decode decodes the settings into into, refusing fields into does not
// have; settings that are absent leave into as it is.
func (s Settings) Decode(into any) error {
	if s.text == nil {
		return nil
	}
	decoder := json.NewDecoder(strings.NewReader(*s.text))
	decoder.DisallowUnknownFields()
	return decoder.Decode(into)
}

// RFC3339 is seconds since the Unix epoch as Kubernetes writes times:
// "2024-05-01T12:00:00Z" (whole seconds, UTC).
func RFC3339(seconds uint64) string {
	return time.Unix(int64(seconds), 0).UTC().Format("2006-01-02T15:04:05Z")
}

// ParseRFC3339 is the seconds since the Unix epoch of a time Kubernetes
// wrote ("2024-05-01T12:00:00Z").
func ParseRFC3339(text string) (int64, error) {
	at, err := time.Parse(time.RFC3339, text)
	if err != nil {
		return 0, err
	}
	return at.Unix(), nil
}
