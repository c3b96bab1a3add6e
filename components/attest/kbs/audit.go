package kbs

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Decisions of a Record.
const (
	DecisionReleased = "released"
	DecisionRefused  = "refused"
)

// Record is one JSON line of the audit log: a key released or refused.
type Record struct {
	// Time is when the decision was made.
	Time time.Time `json:"time"`
	// Decision is released or refused.
	Decision string `json:"decision"`
	// Reasons are the reason codes of a refusal.
	Reasons []guard.Reason `json:"reasons,omitempty"`
	// Tenant is the pod's tenant; empty when not resolved.
	Tenant string `json:"tenant"`
	// Namespace and Pod name the pod; empty before a token named one.
	Namespace string `json:"namespace"`
	// Pod is the pod's name.
	Pod string `json:"pod"`
	// Node is the node the token names.
	Node string `json:"node"`
	// Key is the resource path requested; empty for an attestation.
	Key string `json:"key"`
	// Peer is the request's source address.
	Peer string `json:"peer"`
	// Message explains the decision.
	Message string `json:"message"`
}

// Audit writes records as JSON lines. It is safe for concurrent use.
type Audit struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewAudit returns an audit log that writes to w.
func NewAudit(w io.Writer) *Audit { return &Audit{enc: json.NewEncoder(w)} }

// Write appends one record.
func (a *Audit) Write(r *Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.enc.Encode(r); err != nil {
		return fmt.Errorf("writing an audit record: %w", err)
	}
	return nil
}
