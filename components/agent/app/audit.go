package app

import (
	"net/netip"

	"github.com/xila-guard/xila-guard/components/agent/dataplane"
	"github.com/xila-guard/xila-guard/components/agent/enforcer"
)

// auditDataplane stands in for the kernel in audit mode: the enforcer
// compiles, compares and reports as usual, and nothing is installed.
type auditDataplane struct{}

var _ enforcer.Dataplane = auditDataplane{}

func (auditDataplane) ApplyAll(c []dataplane.Change) []error { return make([]error, len(c)) }
func (auditDataplane) RemoveAll([]int) error                 { return nil }
func (auditDataplane) SetFrontends([]netip.Prefix) error     { return nil }
func (auditDataplane) Endpoints() ([]int, error)             { return nil, nil }
