//go:build !wasip1

package wasmop

const unavailable = "outbound HTTP exists only in the wasm build"
