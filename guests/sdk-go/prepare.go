package wasmop

import "encoding/json"

// Prepare builds encoding/json's encoders and decoders for the types of
// values, and for every struct type they contain, by encoding each value
// once. Call it from an init function with a value of each type the guest
// decodes or encodes (its parent's type, its children's, its status):
//
//	func init() { wasmop.Prepare(v1alpha1.Cache{}, appsv1.Deployment{}) }
//
// `wasmop build` runs init functions once while it builds and keeps their
// memory in the module, so every reconcile, which runs in a fresh
// instance, starts with those tables built instead of building them by
// reflection on its first Unmarshal or Marshal. Natively it costs one
// encoding per value, once per process. A value that does not encode is
// passed over.
func Prepare(values ...any) {
	for _, value := range values {
		_, _ = json.Marshal(value)
	}
}

// The SDK's own types, decoded or encoded on every reconcile.
func init() { Prepare(Condition{}, TypeMeta{}, ObjectMeta{}, childHead{}) }
