//go:build wasip1

package wasmop

import "unsafe"

// hostLog is the contract's `log` import (wasmop:operator/log@0.1.0):
// the level's index, and the message's address and length in UTF-8.
//
//go:wasmimport wasmop:operator/log@0.1.0 log
func hostLog(level int32, message unsafe.Pointer, length uint32)

// write sends the line to the host's log.
func write(level Level, message string) {
	hostLog(int32(level), unsafe.Pointer(unsafe.StringData(message)), uint32(len(message)))
}
