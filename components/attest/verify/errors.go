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
	// Root is the root of trust the evidence's signature chains to, when
	// the chain verified and a later check refused the evidence; empty
	// when the evidence was refused before its chain verified.
	Root Root
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

// RootOf returns the root of trust an error from Verify says the refused
// evidence chains to, or "" when its chain did not verify.
func RootOf(err error) Root {
	var e *Error
	if errors.As(err, &e) {
		return e.Root
	}
	return ""
}

// rooted records on a refusal of evidence whose chain verified the root it
// chains to.
func rooted(err error, root Root) error {
	var e *Error
	if errors.As(err, &e) {
		e.Root = root
	}
	return err
}

func fail(reason guard.Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}
