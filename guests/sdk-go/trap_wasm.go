//go:build wasm

package wasmop

// trap ends the call with a WebAssembly trap (`unreachable`), which the
// host reports as the guest's failure; value was logged already.
func trap(value any) { unreachable() }

// unreachable executes the `unreachable` instruction (trap_wasm.s).
func unreachable()
