package wasmop

import (
	"fmt"
	"runtime"
	"strings"
)

// Reconciler is what a guest implements: controller-runtime's Reconciler
// and its SetupWithManager, as two calls the host makes.
type Reconciler interface {
	// Describe says which kinds the guest manages, given the guest-list
	// entry's settings. The host calls it once per loaded module version
	// and settings, before any reconcile; an error refuses the settings
	// (the running version, if any, keeps serving).
	Describe(settings Settings) (Description, error)
	// Reconcile answers one parent's request with the children it wants,
	// its status, Events and a requeue. An [Error] says whether the
	// failure is retryable or permanent; any other error is retryable.
	Reconcile(request *Request) (*Response, error)
}

// Admitter is a [Reconciler] that also defaults and validates objects of
// its primary kind (controller-runtime's Defaulter and Validator): the
// host serves it as a mutating and a validating webhook.
type Admitter interface {
	// Admit is the verdict on one request; see [Review].
	Admit(review *Review) AdmissionResponse
}

// Converter is a [Reconciler] that also converts its primary kind
// between versions (a conversion webhook's hub and spokes in one
// function); see [ConvertAll].
type Converter interface {
	// Convert is object in desiredAPIVersion ("apps.example.com/v1beta1"),
	// apiVersion set to it; kind and metadata stay as they are (only
	// labels and annotations may change). An error fails the API
	// server's whole request with its message.
	Convert(object Object, desiredAPIVersion string) (Object, error)
}

var registered Reconciler

// Export registers the guest's [Reconciler] (an [Admitter] and a
// [Converter] too, when it is one); call it once, from an init function
// of the guest's package. `wasmop build` runs the package's init
// functions while it builds, and makes the component export what the
// registered value implements.
func Export(reconciler Reconciler) {
	if registered != nil {
		panic("wasmop.Export called twice: a guest exports one Reconciler")
	}
	if reconciler == nil {
		panic("wasmop.Export called with nil")
	}
	registered = reconciler
}

// Exported is the registered [Reconciler], or nil.
func Exported() Reconciler { return registered }

// What the registered value exports, as the bits `wasmop build` reads.
const (
	exportsOperator   = 1
	exportsAdmission  = 2
	exportsConversion = 4
)

func exports() int32 {
	if registered == nil {
		return 0
	}
	bits := int32(exportsOperator)
	if _, ok := registered.(Admitter); ok {
		bits |= exportsAdmission
	}
	if _, ok := registered.(Converter); ok {
		bits |= exportsConversion
	}
	return bits
}

// The functions below are the exports' bodies: the bindings `wasmop
// build` generates call them with the contract's values. A guest calls
// its own Reconciler instead.

// ServeDescribe is the `describe` export.
func ServeDescribe(settings *string) (description Description, err error) {
	defer trapOnPanic("describe")
	if registered == nil {
		return Description{}, fmt.Errorf("no Reconciler: the guest's package never called wasmop.Export")
	}
	return registered.Describe(Settings{text: settings})
}

// ServeReconcile is the `reconcile` export: the request wrapped, the
// guest's Reconcile called, its answer or its error (a refused response
// as a permanent error) in the contract's shape.
func ServeReconcile(wire ReconcileRequest) (ReconcileResponse, *Error) {
	defer trapOnPanic("reconcile")
	if registered == nil {
		return ReconcileResponse{}, Permanent("no Reconciler: the guest's package never called wasmop.Export")
	}
	request := NewRequest(wire)
	response, err := registered.Reconcile(request)
	if err == nil {
		err = request.Err()
	}
	if err == nil && response == nil {
		err = Permanent("Reconcile returned neither a response nor an error")
	}
	if err == nil {
		err = response.Err()
	}
	if err != nil {
		return ReconcileResponse{}, reconcileError(err)
	}
	return response.Wire(), nil
}

// ServeAdmit is the `admit` export. A panic in Admit is the guest's
// failure, not a verdict: it traps, and the host answers as the guest
// list entry's admissionFailurePolicy says.
func ServeAdmit(wire AdmissionReview) AdmissionResponse {
	defer trapOnPanic("admit")
	admitter, ok := registered.(Admitter)
	if !ok {
		panic("the registered Reconciler is not an Admitter")
	}
	review, err := NewReview(wire)
	if err != nil {
		return Deny(err.Error())
	}
	return admitter.Admit(review)
}

// ServeConvert is the `convert` export.
func ServeConvert(objects []string, desiredAPIVersion string) ([]string, error) {
	defer trapOnPanic("convert")
	converter, ok := registered.(Converter)
	if !ok {
		panic("the registered Reconciler is not a Converter")
	}
	return ConvertAll(converter, objects, desiredAPIVersion)
}

// trapOnPanic, deferred by each export, turns a panic into what a Rust
// guest's panic is: its message, with where it happened, at error level in
// the host's log (the host reports it with the trap), then a trap at
// once, while the panicking frames are still on the stack, so the trap
// shows the guest's own functions. Natively the panic goes on.
func trapOnPanic(export string) {
	value := recover()
	if value == nil {
		return
	}
	write(LevelError, fmt.Sprintf("panicked at %s: %v (in %s)", panicSite(), value, export))
	trap(value)
}

// panicSite is the file and line of the function that panicked: the
// first frame above the runtime's panic functions.
func panicSite() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		frame, more := frames.Next()
		if frame.Function != "" && !strings.HasPrefix(frame.Function, "runtime.") {
			return fmt.Sprintf("%s:%d", frame.File, frame.Line)
		}
		if !more {
			return "(unknown)"
		}
	}
}
