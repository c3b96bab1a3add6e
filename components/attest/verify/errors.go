package verify

import (
	"errors"
	"fmt"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Error is a verdict against evidence: the reason code and what was wrong.
type Error struct {
	// Reason is the code operators match on.
	Reason guard.Reason
	// Err says what was wrong, for people.
	Err error
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the reason code of an error from Verify. It reports
// false for an error about the request itself (an unknown profile or TEE
// type, a malformed reference), which callers must treat as a failure too.
func ReasonOf(err error) (guard.Reason, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason, true
	}
	return "", false
}

func fail(reason guard.Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}
