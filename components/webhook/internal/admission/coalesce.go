package admission

import (
	"context"
	"fmt"
	"sync"

	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// coalescer shares one evaluator call among the reviews in flight at the
// same moment that ask the same question. The node-independent verdict a
// protected pod needs depends on its tenant, its policy and the profile,
// not on the pod, so a burst of one tenant's pods (a Job's, a scaled
// Deployment's) costs one call at a time instead of one per pod, and the
// evaluator does not fall behind the burst.
//
// Nothing is cached: a review that arrives after a call has answered
// starts a new call, so an evaluator that goes down, or a policy that
// changes, is seen by the next review. A failed call fails every review
// that waited for it, and each review still gives up, failing closed, at
// its own deadline. The call itself runs detached from any one review's
// cancellation, bounded by the client's own timeout, so that the first
// review's caller going away does not fail the others.
type coalescer struct {
	ev Evaluator

	mu    sync.Mutex
	calls map[string]*sharedCall
}

type sharedCall struct {
	done   chan struct{}
	answer *client.Evaluation
	err    error
	// waiting counts the reviews that shared the call, for tests.
	waiting int
}

func newCoalescer(ev Evaluator) *coalescer {
	return &coalescer{ev: ev, calls: map[string]*sharedCall{}}
}

// Evaluate returns the answer to req, from a call already in flight for
// the same tenant, policy and profile when there is one. Requests about
// nodes are not shared: their answers depend on the nodes' evidence.
func (c *coalescer) Evaluate(ctx context.Context, req *wire.EvaluateRequest) (*client.Evaluation, error) {
	if len(req.Nodes) > 0 {
		return c.ev.Evaluate(ctx, req)
	}
	key := question(req)
	c.mu.Lock()
	call, inFlight := c.calls[key]
	if !inFlight {
		call = &sharedCall{done: make(chan struct{})}
		c.calls[key] = call
		go c.run(context.WithoutCancel(ctx), key, call, req)
	}
	call.waiting++
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.answer, call.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for the evaluator: %w", client.ErrTimeout, ctx.Err())
	}
}

// question is what a node-independent answer depends on: the request
// without its pod, encoded.
func question(req *wire.EvaluateRequest) string {
	return string(wire.AppendRequest(nil, &wire.EvaluateRequest{
		Profile: req.Profile, Tenant: req.Tenant, Policy: req.Policy, Nodes: []wire.Node{}}))
}

// run makes the call and hands its outcome to every review waiting.
func (c *coalescer) run(ctx context.Context, key string, call *sharedCall, req *wire.EvaluateRequest) {
	call.answer, call.err = c.ev.Evaluate(ctx, req)
	c.mu.Lock()
	delete(c.calls, key)
	c.mu.Unlock()
	close(call.done)
}
