package wasmop

import (
	"errors"
	"fmt"
)

// Error is a reconcile failure the guest reports: retryable (the host
// retries with backoff) or permanent (the host reports it and waits for
// the parent or a child to change). It is a value the host reports in its
// log, an Event and a condition, not a trap: return it instead of
// panicking. Wrapped errors keep their kind ([errors.As] finds it).
type Error struct {
	// Kind is retryable or permanent.
	Kind ErrorKind
	// Message says what went wrong.
	Message string
}

// Error is the message.
func (e *Error) Error() string { return e.Message }

// Retryable is a transient failure.
func Retryable(message string) *Error { return &Error{Kind: ErrorRetryable, Message: message} }

// Retryablef is [Retryable] with a [fmt.Sprintf] message.
func Retryablef(format string, args ...any) *Error {
	return Retryable(fmt.Sprintf(format, args...))
}

// Permanent is input that can never succeed as it is.
func Permanent(message string) *Error { return &Error{Kind: ErrorPermanent, Message: message} }

// Permanentf is [Permanent] with a [fmt.Sprintf] message.
func Permanentf(format string, args ...any) *Error {
	return Permanent(fmt.Sprintf(format, args...))
}

// reconcileError is err as the contract's reconcile-error: the kind of the
// [Error] it wraps, else retryable (a bug in the guest fails the same way
// again, but a new module version may fix it), and err's whole message.
func reconcileError(err error) *Error {
	var guest *Error
	if errors.As(err, &guest) {
		return &Error{Kind: guest.Kind, Message: err.Error()}
	}
	return &Error{Kind: ErrorRetryable, Message: err.Error()}
}
