//go:build wasip1

package wasmop

import "runtime/debug"

// Each call runs in a fresh instance that the host throws away, so memory
// a collection would free is never used again by that call's successors,
// and a collection that starts during a reconcile costs it milliseconds.
// The collector therefore runs only when the heap nears 32 MiB (half the
// host's default memoryLimit of 64 MiB): a reconcile that allocates less
// never collects. A guest whose list entry sets a memoryLimit under 32
// MiB calls debug.SetMemoryLimit itself with a lower soft limit.
func init() {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(32 << 20)
}
