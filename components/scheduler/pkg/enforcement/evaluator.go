package enforcement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Evaluator decides placements; *client.Client is the real one. It must
// return an error, never a partial answer, when it has no decision.
type Evaluator interface {
	Evaluate(ctx context.Context, req *wire.EvaluateRequest) (*client.Evaluation, error)
}

// Backoff after evaluator failures: the first failure keeps the evaluator
// out of the scheduling loop for minBackoff, each further one doubles it.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// errBackingOff is returned while the evaluator is given time to recover.
var errBackingOff = errors.New("not asking the evaluator")

// guardedEvaluator stops calling an evaluator that keeps failing. PreFilter
// runs in the scheduler's only scheduling loop: without this, an evaluator
// that hangs would cost every protected pod the whole timeout, and every
// other pod would wait behind them. While it backs off, calls fail at once,
// which refuses exactly as a failed call does.
type guardedEvaluator struct {
	next  Evaluator
	clock clock.PassiveClock

	mu        sync.Mutex
	failures  int
	openUntil time.Time
	last      error
}

// Evaluate asks the evaluator unless it is backing off after failures.
func (g *guardedEvaluator) Evaluate(ctx context.Context, req *wire.EvaluateRequest) (*client.Evaluation, error) {
	g.mu.Lock()
	if now := g.clock.Now(); now.Before(g.openUntil) {
		err := fmt.Errorf("%w for %s after %d failure(s) in a row: %w",
			errBackingOff, g.openUntil.Sub(now).Round(time.Millisecond), g.failures, g.last)
		g.mu.Unlock()
		return nil, err
	}
	g.mu.Unlock()

	ev, err := g.next.Evaluate(ctx, req)

	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err == nil:
		g.failures, g.openUntil, g.last = 0, time.Time{}, nil
	case errors.Is(err, client.ErrInvalidRequest), ctx.Err() != nil && !errors.Is(err, client.ErrTimeout):
		// Our own mistake, or our caller gave up: not the evaluator's fault.
	default:
		g.failures++
		backoff := maxBackoff
		if g.failures < 16 {
			backoff = min(maxBackoff, minBackoff<<(g.failures-1))
		}
		g.openUntil, g.last = g.clock.Now().Add(backoff), err
	}
	return ev, err
}

// retryDelay says when a pod refused for want of a decision is worth
// trying again: when the evaluator is asked again, and not before a second
// has passed, so that refusals do not spin.
func (g *guardedEvaluator) retryDelay() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return max(time.Second, g.openUntil.Sub(g.clock.Now()))
}
