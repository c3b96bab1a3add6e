package postbind

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Kinds of record.
const (
	// KindViolation reports a pod's first decision that is not allow.
	KindViolation = "violation"
	// KindDrift reports a decision that changed since the previous one.
	KindDrift = "drift"
)

// Record is one JSON line of the report.
type Record struct {
	// Time is when the decision was made.
	Time time.Time `json:"time"`
	// Kind is violation or drift.
	Kind string `json:"kind"`
	// Tenant is the pod's tenant; empty when unresolved.
	Tenant string `json:"tenant"`
	// Namespace and Pod name the pod.
	Namespace string `json:"namespace"`
	// Pod is the pod's name.
	Pod string `json:"pod"`
	// Node is the node the pod is bound to.
	Node string `json:"node"`
	// Scheduler is the pod's schedulerName: who placed it.
	Scheduler string `json:"scheduler"`
	// Decision is the evaluator's decision, or indeterminate when none was
	// obtained.
	Decision guard.Decision `json:"decision"`
	// PreviousDecision is the decision before a drift.
	PreviousDecision guard.Decision `json:"previousDecision,omitempty"`
	// Reasons are the reason codes.
	Reasons []guard.Reason `json:"reasons"`
	// Incarnation is the evidence incarnation judged; empty without evidence.
	Incarnation string `json:"incarnation"`
	// Message is the evaluator's explanation.
	Message string `json:"message"`
}

// Sink writes records as JSON lines. It is safe for concurrent use.
type Sink struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewSink returns a sink that writes to w.
func NewSink(w io.Writer) *Sink { return &Sink{enc: json.NewEncoder(w)} }

// Write appends one record.
func (s *Sink) Write(r *Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enc.Encode(r); err != nil {
		return fmt.Errorf("writing a %s record: %w", r.Kind, err)
	}
	return nil
}
