package enforcement

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// failing is an evaluator that answers with err.
type failing struct {
	err   error
	calls int
}

func (f *failing) Evaluate(context.Context, *wire.EvaluateRequest) (*client.Evaluation, error) {
	f.calls++
	return nil, f.err
}

func TestGuardedEvaluatorBacksOff(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	next := &failing{err: fmt.Errorf("%w: connection refused", client.ErrUnavailable)}
	g := &guardedEvaluator{next: next, clock: clk}
	ctx := context.Background()
	req := &wire.EvaluateRequest{}

	for i, wantOpen := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second} {
		if _, err := g.Evaluate(ctx, req); !errors.Is(err, client.ErrUnavailable) || errors.Is(err, errBackingOff) {
			t.Fatalf("call %d: error %v, want the evaluator's own", i, err)
		}
		if next.calls != i+1 {
			t.Fatalf("call %d: evaluator asked %d times", i, next.calls)
		}
		_, err := g.Evaluate(ctx, req)
		if !errors.Is(err, errBackingOff) || !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("call %d while backing off: error %v", i, err)
		}
		if failureReason(err) != "EVALUATOR_UNAVAILABLE" {
			t.Errorf("backing off is reported as %s", failureReason(err))
		}
		if got := g.retryDelay(); got != max(time.Second, wantOpen) {
			t.Errorf("after %d failures: retry in %s, want %s", i+1, got, max(time.Second, wantOpen))
		}
		clk.Step(wantOpen)
	}

	for range 20 {
		_, _ = g.Evaluate(ctx, req)
		clk.Step(time.Hour)
	}
	_, _ = g.Evaluate(ctx, req)
	if got := g.retryDelay(); got != maxBackoff {
		t.Errorf("backoff after many failures = %s, want the cap %s", got, maxBackoff)
	}

	clk.Step(time.Hour)
	next.err = nil
	if _, err := g.Evaluate(ctx, req); err != nil {
		t.Fatal(err)
	}
	next.err = client.ErrTimeout
	_, _ = g.Evaluate(ctx, req)
	if got := g.retryDelay(); got != time.Second {
		t.Errorf("a success did not reset the backoff: retry in %s", got)
	}
}

func TestGuardedEvaluatorIgnoresOwnMistakes(t *testing.T) {
	next := &failing{err: fmt.Errorf("%w: node listed twice", client.ErrInvalidRequest)}
	g := &guardedEvaluator{next: next, clock: testingclock.NewFakeClock(time.Now())}
	for range 3 {
		_, _ = g.Evaluate(context.Background(), &wire.EvaluateRequest{})
	}
	if next.calls != 3 {
		t.Errorf("evaluator asked %d times, want 3: invalid requests are not its failures", next.calls)
	}
}
