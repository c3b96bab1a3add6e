package client

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidRequest means the request was refused before it was sent,
	// e.g. because two nodes share a name.
	ErrInvalidRequest = errors.New("invalid evaluation request")
	// ErrTimeout means the evaluator did not answer within the call's
	// timeout or the caller's deadline.
	ErrTimeout = errors.New("evaluator timed out")
	// ErrUnavailable means the evaluator could not be reached: the
	// connection was refused or broken, the name did not resolve, or the
	// caller cancelled the call.
	ErrUnavailable = errors.New("evaluator unavailable")
	// ErrStatus means the evaluator answered with a status other than 200;
	// the error is a *StatusError.
	ErrStatus = errors.New("evaluator returned an error status")
	// ErrMalformedResponse means the answer could not be decoded or does
	// not match the request: a node's result is missing, duplicated or
	// unasked for, or a decision is not one of allow, deny, indeterminate.
	ErrMalformedResponse = errors.New("malformed evaluator response")
)

// StatusError is an answer with a status other than 200 OK.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
	// Message is the evaluator's explanation, when it gave one.
	Message string
}

// Error renders the status and the evaluator's message.
func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s: HTTP %d", ErrStatus, e.Code)
	}
	return fmt.Sprintf("%s: HTTP %d: %s", ErrStatus, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrStatus) hold for every StatusError.
func (e *StatusError) Is(target error) bool { return target == ErrStatus }
