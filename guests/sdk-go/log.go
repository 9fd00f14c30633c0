package wasmop

import (
	"fmt"
	"strconv"
	"strings"
)

// Level is the severity of a log line, as the contract's log levels.
type Level uint8

const (
	// LevelTrace is very detailed tracing.
	LevelTrace Level = iota
	// LevelDebug is debugging detail.
	LevelDebug
	// LevelInfo is normal operation.
	LevelInfo
	// LevelWarn is something unexpected but handled.
	LevelWarn
	// LevelError is a failure.
	LevelError
)

// String is the level's lower-case name.
func (l Level) String() string {
	switch l {
	case LevelTrace:
		return "trace"
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	default:
		return "error"
	}
}

// Logger writes lines to the host's log, where they appear tagged with
// the guest's name; the host keeps at most 200 lines of one call, each at
// most 4 KiB. Like logr's (log.FromContext(ctx) in controller-runtime),
// each method takes a message and key-value pairs:
//
//	wasmop.Log.Info("creating deployment", "name", name)
//
// writes "creating deployment name=demo". Natively (unit tests) lines
// go to stderr only when $WASMOP_GUEST_LOG is set.
type Logger struct{}

// Log is the guest's logger.
var Log Logger

// Trace writes a trace line.
func (Logger) Trace(message string, keysAndValues ...any) {
	write(LevelTrace, line(message, keysAndValues))
}

// Debug writes a debug line.
func (Logger) Debug(message string, keysAndValues ...any) {
	write(LevelDebug, line(message, keysAndValues))
}

// Info writes an info line.
func (Logger) Info(message string, keysAndValues ...any) {
	write(LevelInfo, line(message, keysAndValues))
}

// Warn writes a warning line.
func (Logger) Warn(message string, keysAndValues ...any) {
	write(LevelWarn, line(message, keysAndValues))
}

// Error writes an error line with err (nil: none) after the message.
func (Logger) Error(err error, message string, keysAndValues ...any) {
	if err != nil {
		keysAndValues = append([]any{"error", err.Error()}, keysAndValues...)
	}
	write(LevelError, line(message, keysAndValues))
}

// line is message followed by key=value for each pair, a value quoted
// when it has spaces, quotes or nothing.
func line(message string, keysAndValues []any) string {
	if len(keysAndValues) == 0 {
		return message
	}
	var out strings.Builder
	out.WriteString(message)
	for i := 0; i < len(keysAndValues); i += 2 {
		key := fmt.Sprint(keysAndValues[i])
		value := "(missing)"
		if i+1 < len(keysAndValues) {
			value = fmt.Sprint(keysAndValues[i+1])
		}
		if value == "" || strings.ContainsAny(value, " \"=\t\n") {
			value = strconv.Quote(value)
		}
		out.WriteString(" " + key + "=" + value)
	}
	return out.String()
}
