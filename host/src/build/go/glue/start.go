// Written by `wasmop build` into the bindings' helper package (beside
// wit-bindgen-go's own files, which it leaves as they are); DO NOT EDIT.
//
// The WASI adapter allocates its state through the module's cabi_realloc
// on its first call, and this package's cabi_realloc calls the adapter
// (to pause its clock) once the Go runtime is up: an adapter whose first
// call is that allocation calls itself and traps. Started normally,
// `_initialize` reaches the adapter long before the runtime is up. The
// module `wasmop build` writes is started once at build time, without the
// adapter: so there, cabi_realloc is set back to the runtime's sbrk
// (reallocBySbrk), and the component's start (startAdapter, exported as
// `_initialize`) makes the adapter's first call, then lets cabi_realloc
// allocate from the Go heap again.

package runtime

import "unsafe"

//go:wasmimport wasi_snapshot_preview1 environ_sizes_get
func environSizesGet(count, size unsafe.Pointer) uint32

//go:wasmexport wasmop-realloc-by-sbrk
func reallocBySbrk() { useGCAllocations = false }

//go:wasmexport wasmop-start-adapter
func startAdapter() {
	var count, size uint32
	environSizesGet(unsafe.Pointer(&count), unsafe.Pointer(&size))
	useGCAllocations = true
}
