package client

import (
	"fmt"
	"sync"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Evaluation is an answer that matches its request: one valid result per
// requested node.
type Evaluation struct {
	// Profile is the profile the evaluator applied.
	Profile guard.Profile
	// Pod is the node-independent verdict.
	Pod wire.Verdict
	// Results holds one result per requested node, in request order.
	Results []wire.NodeResult

	// index maps node names to results, built on the first lookup.
	index  sync.Once
	byNode map[string]int
}

// Node returns the result for the named node, and false for a node that was
// not requested.
func (e *Evaluation) Node(name string) (wire.NodeResult, bool) {
	e.index.Do(func() {
		if e.byNode == nil {
			e.byNode = make(map[string]int, len(e.Results))
			for i := range e.Results {
				e.byNode[e.Results[i].Node] = i
			}
		}
	})
	i, ok := e.byNode[name]
	if !ok {
		return wire.NodeResult{}, false
	}
	return e.Results[i], true
}

// Allowed reports whether the evaluator explicitly allowed the named node.
// It is false for any other decision and for a node that was not requested.
func (e *Evaluation) Allowed(name string) bool {
	r, ok := e.Node(name)
	return ok && r.Decision == guard.DecisionAllow
}

// newEvaluation checks an answer against its request, whose node names
// checkRequest found distinct. Anything that does not add up is an
// ErrMalformedResponse, so that a confused or hostile server cannot turn a
// refusal into an allow.
func newEvaluation(req *wire.EvaluateRequest, resp *wire.EvaluateResponse) (*Evaluation, error) {
	if !resp.Profile.IsValid() {
		return nil, fmt.Errorf("%w: unknown profile %q", ErrMalformedResponse, resp.Profile)
	}
	if req.Profile == guard.ProfileProduction && resp.Profile != guard.ProfileProduction {
		return nil, fmt.Errorf("%w: asked for the production profile, got %q", ErrMalformedResponse, resp.Profile)
	}
	if !resp.Pod.Decision.IsValid() {
		return nil, fmt.Errorf("%w: pod decision %q is not allow, deny or indeterminate", ErrMalformedResponse, resp.Pod.Decision)
	}
	ev := &Evaluation{Profile: resp.Profile, Pod: resp.Pod}
	for i := range resp.Results {
		if err := checkResult(&resp.Results[i], resp.Pod.Decision); err != nil {
			return nil, err
		}
	}
	if inRequestOrder(req, resp) {
		// What the evaluator sends: the answer's list is the result.
		ev.Results = resp.Results
		return ev, nil
	}
	// Out of order: match results to nodes by name, and keep the index.
	byNode := make(map[string]int, len(req.Nodes))
	for i := range req.Nodes {
		byNode[req.Nodes[i].Name] = i
	}
	ev.byNode = byNode
	ev.Results = make([]wire.NodeResult, len(req.Nodes))
	filled := make([]bool, len(req.Nodes))
	for _, r := range resp.Results {
		i, ok := byNode[r.Node]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: result for node %q, which was not requested", ErrMalformedResponse, r.Node)
		case filled[i]:
			return nil, fmt.Errorf("%w: two results for node %q", ErrMalformedResponse, r.Node)
		}
		filled[i] = true
		ev.Results[i] = r
	}
	for i, ok := range filled {
		if !ok {
			return nil, fmt.Errorf("%w: no result for node %q", ErrMalformedResponse, req.Nodes[i].Name)
		}
	}
	return ev, nil
}

// checkResult refuses a result whose decision is unknown, or that allows a
// node although the pod is refused.
func checkResult(r *wire.NodeResult, pod guard.Decision) error {
	switch {
	case !r.Decision.IsValid():
		return fmt.Errorf("%w: node %q: decision %q is not allow, deny or indeterminate", ErrMalformedResponse, r.Node, r.Decision)
	case r.Decision == guard.DecisionAllow && pod != guard.DecisionAllow:
		return fmt.Errorf("%w: node %q allowed although the pod is refused", ErrMalformedResponse, r.Node)
	}
	return nil
}

// inRequestOrder reports whether the answer has exactly one result per
// requested node, in request order.
func inRequestOrder(req *wire.EvaluateRequest, resp *wire.EvaluateResponse) bool {
	if len(resp.Results) != len(req.Nodes) {
		return false
	}
	for i := range resp.Results {
		if resp.Results[i].Node != req.Nodes[i].Name {
			return false
		}
	}
	return true
}
