//go:build !wasm

package wasmop

// trap goes on panicking with value: natively a panic is a test's
// failure, with Go's own report.
func trap(value any) { panic(value) }
