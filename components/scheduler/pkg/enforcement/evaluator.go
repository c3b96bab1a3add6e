package enforcement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// evaluator decides placements; *evaluate.Evaluator, linked into the
// scheduler, is the real one.
type evaluator interface {
	Evaluate(req *wire.EvaluateRequest) *wire.EvaluateResponse
}

var _ evaluator = (*evaluate.Evaluator)(nil)

// newEvaluator builds the evaluator of the settings' profile.
func newEvaluator(s settings) (*evaluate.Evaluator, error) {
	return evaluate.New(evaluate.Options{Profile: s.profile})
}

// errMismatch marks an answer that does not match its request.
var errMismatch = errors.New("the evaluator's answer does not match the request")

// evaluate asks the evaluator, records the call, and holds the answer
// against the request.
func (pl *Enforcement) evaluate(ctx context.Context, point string, req *wire.EvaluateRequest) (*wire.EvaluateResponse, error) {
	start := time.Now()
	resp := pl.eval.Evaluate(req)
	evaluationDuration.WithLabelValues(point).Observe(time.Since(start).Seconds())
	err := checkAnswer(req, resp)
	evaluationsTotal.WithLabelValues(point, callResult(err)).Inc()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Refusing on an answer that does not add up", "point", point,
			"pod", klog.KRef(req.Pod.Namespace, req.Pod.Name), "nodes", len(req.Nodes))
		return nil, err
	}
	return resp, nil
}

// checkAnswer holds an answer against its request: a known decision about
// the pod, and one result per requested node, in request order. The
// evaluator promises as much; checking costs a comparison per node and
// keeps an allow from ever being read off another node's result.
func checkAnswer(req *wire.EvaluateRequest, resp *wire.EvaluateResponse) error {
	if resp == nil {
		return fmt.Errorf("%w: no answer", errMismatch)
	}
	if !resp.Pod.Decision.IsValid() {
		return fmt.Errorf("%w: pod decision %q is not allow, deny or indeterminate", errMismatch, resp.Pod.Decision)
	}
	if len(resp.Results) != len(req.Nodes) {
		return fmt.Errorf("%w: %d result(s) for %d node(s)", errMismatch, len(resp.Results), len(req.Nodes))
	}
	for i := range req.Nodes {
		if got, want := resp.Results[i].Node, req.Nodes[i].Name; got != want {
			return fmt.Errorf("%w: result %d is about node %q, not %q", errMismatch, i, got, want)
		}
	}
	return nil
}
