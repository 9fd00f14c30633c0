//go:build !wasip1

package wasmop

import (
	"fmt"
	"os"
)

// write prints the line on stderr when $WASMOP_GUEST_LOG is set: a unit
// test or benchmark must not measure terminal output.
func write(level Level, message string) {
	if os.Getenv("WASMOP_GUEST_LOG") != "" {
		fmt.Fprintf(os.Stderr, "[guest %s] %s\n", level, message)
	}
}
