//go:build wasip1

package wasmop

// buildExports tells `wasmop build`, which calls it once after the
// runtime's start-up (and removes it from the module), what the
// registered value implements: bit 1 a Reconciler was registered, 2 an
// Admitter, 4 a Converter.
//
//go:wasmexport wasmop-build-exports
func buildExports() int32 { return exports() }
