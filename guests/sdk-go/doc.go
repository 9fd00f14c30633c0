// Package wasmop is the SDK for wasmop operator guests written in Go.
//
// A wasmop guest is pure reconcile logic compiled to a WebAssembly
// component: the host owns the watches, the queue, the API clients and the
// credentials, hands the guest a parent object and the children it
// observes, and applies what the guest answers. This package wraps the
// contract (`wasmop:operator@0.1.0`, the WIT in `wit/operator@0.1.0/`) so
// that a guest is a Go value implementing [Reconciler], registered with
// [Export] from an init function of the guest's package:
//
//	func init() { wasmop.Export(&CacheReconciler{}) }
//
// What it gives, as the Rust, TypeScript and Python SDKs do:
//   - [Request]: the parent, the observed children and the related objects,
//     each parsed once on first use and looked up by kind and name;
//   - [Response]: desired children, status, Events, kept children, requeue
//     and the finalizer's answer, each checked as the host would check it;
//   - [SetStatusCondition]: conditions whose transition time changes only
//     when their status does, so a converged parent gets the status it
//     already has and the host writes nothing;
//   - [Retryable] and [Permanent] errors, mapped to the contract's
//     `reconcile-error`; any other error is retryable, and a panic is a
//     trap whose message the host reports;
//   - [Admitter] and [Converter] (with [Review], [Patch], [Allow], [Deny]
//     and [ConvertAll]): defaulting, validation and conversion of the
//     primary kind, served by the host as webhooks;
//   - [Send]: outbound HTTP through `wasi:http`, limited by the host to the
//     origins the guest list's `allowedOutboundHosts` names;
//   - [Info], [Warn], [Error] and friends: lines in the host's log.
//
// Everything but the WebAssembly glue (files built only for GOOS=wasip1)
// is plain Go, so a guest's logic runs natively and `go test` tests it.
// `wasmop build` makes the component: it generates the contract's bindings
// from the WIT beside the guest, builds with GOOS=wasip1 GOARCH=wasm,
// runs the Go runtime's start-up once and keeps its memory in the module,
// and wraps the result into a component. The exports follow what the
// registered value implements: `admission` when it is an [Admitter],
// `conversion` when it is a [Converter].
package wasmop

// Contract is the WIT package this SDK is written for; `wasmop build`
// refuses a WIT of another version.
const Contract = "wasmop:operator@0.1.0"
