package postbind

import (
	"context"
	"errors"
	"fmt"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Evaluator decides one pod on one node. It returns the node's result, or an
// error when no decision could be obtained.
type Evaluator interface {
	Evaluate(ctx context.Context, req *wire.EvaluateRequest) (wire.NodeResult, error)
}

// Remote asks the xila-guard-core service.
type Remote struct {
	// Client is the fail-closed evaluator client.
	Client *client.Client
}

// Evaluate implements Evaluator.
func (r Remote) Evaluate(ctx context.Context, req *wire.EvaluateRequest) (wire.NodeResult, error) {
	ev, err := r.Client.Evaluate(ctx, req)
	if err != nil {
		return wire.NodeResult{}, err
	}
	return only(req, ev.Results)
}

// Local runs the evaluator library in-process: the same decisions as the
// service, without a network hop.
type Local struct {
	// Evaluator is the library's evaluator.
	Evaluator *evaluate.Evaluator
}

// Evaluate implements Evaluator.
func (l Local) Evaluate(_ context.Context, req *wire.EvaluateRequest) (wire.NodeResult, error) {
	return only(req, l.Evaluator.Evaluate(req).Results)
}

// only returns the result for the request's single node.
func only(req *wire.EvaluateRequest, results []wire.NodeResult) (wire.NodeResult, error) {
	if len(req.Nodes) != 1 || len(results) != 1 || results[0].Node != req.Nodes[0].Name || !results[0].Decision.IsValid() {
		return wire.NodeResult{}, fmt.Errorf("%w: want one valid result for one node", client.ErrMalformedResponse)
	}
	return results[0], nil
}

// Failure turns an evaluator error into the indeterminate result that is
// reported in its place: an unanswered question is itself a finding.
func Failure(node string, err error) wire.NodeResult {
	reason := guard.ReasonEvaluatorError
	switch {
	case errors.Is(err, client.ErrTimeout):
		reason = guard.ReasonEvaluatorTimeout
	case errors.Is(err, client.ErrUnavailable):
		reason = guard.ReasonEvaluatorUnavailable
	}
	return wire.NodeResult{Node: node, Decision: guard.DecisionIndeterminate, Reasons: []guard.Reason{reason},
		Message: "no decision could be obtained: " + err.Error()}
}
