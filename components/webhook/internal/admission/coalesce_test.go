package admission

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// gatedEvaluator answers only when released, and counts its calls.
type gatedEvaluator struct {
	calls   atomic.Int32
	started chan struct{}
	release chan struct{}
	err     error
}

func newGated() *gatedEvaluator {
	return &gatedEvaluator{started: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gatedEvaluator) Evaluate(ctx context.Context, req *wire.EvaluateRequest) (*client.Evaluation, error) {
	g.calls.Add(1)
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if g.err != nil {
		return nil, g.err
	}
	return &client.Evaluation{Profile: guard.ProfileProduction,
		Pod: wire.Verdict{Decision: guard.DecisionAllow, Message: "tenant " + req.Tenant.ID}}, nil
}

func podRequest(tenant, pod string) *wire.EvaluateRequest {
	return &wire.EvaluateRequest{Pod: wire.Pod{Namespace: tenant + "-ns", Name: pod},
		Tenant: &wire.Tenant{ID: tenant}, Policy: &wire.Policy{Name: "p"}, Nodes: []wire.Node{}}
}

// waitFor polls until cond holds, failing after a second.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (c *coalescer) waiters(req *wire.EvaluateRequest) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call := c.calls[question(req)]; call != nil {
		return call.waiting
	}
	return 0
}

// TestCoalesceSharesOneCallPerQuestion sends reviews of two tenants at
// once: each tenant's reviews share one call, the tenants do not share,
// and every review gets its own tenant's answer.
func TestCoalesceSharesOneCallPerQuestion(t *testing.T) {
	g := newGated()
	c := newCoalescer(g)
	type result struct {
		tenant string
		ev     *client.Evaluation
		err    error
	}
	results := make(chan result, 10)
	for i := range 10 {
		tenant := []string{"acme", "globex"}[i%2]
		go func() {
			ev, err := c.Evaluate(context.Background(), podRequest(tenant, "pod"))
			results <- result{tenant, ev, err}
		}()
	}
	waitFor(t, "five reviews of each tenant waiting", func() bool {
		return c.waiters(podRequest("acme", "x")) == 5 && c.waiters(podRequest("globex", "x")) == 5
	})
	if n := g.calls.Load(); n != 2 {
		t.Fatalf("%d calls for two tenants, want 2", n)
	}
	close(g.release)
	for range 10 {
		r := <-results
		if r.err != nil || r.ev.Pod.Message != "tenant "+r.tenant {
			t.Fatalf("review of %s got %+v, %v", r.tenant, r.ev, r.err)
		}
	}
	// Nothing is kept: the next review calls again.
	g.release = make(chan struct{})
	close(g.release)
	if _, err := c.Evaluate(context.Background(), podRequest("acme", "later")); err != nil {
		t.Fatal(err)
	}
	if n := g.calls.Load(); n != 3 {
		t.Fatalf("%d calls after a later review, want 3: an answer was reused", n)
	}
}

// TestCoalesceFailsEveryWaiter fails the shared call: every review that
// waited for it gets the error, none an answer.
func TestCoalesceFailsEveryWaiter(t *testing.T) {
	g := newGated()
	g.err = client.ErrUnavailable
	c := newCoalescer(g)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			ev, err := c.Evaluate(context.Background(), podRequest("acme", "pod"))
			if ev != nil {
				err = errors.New("got an answer from a failed call")
			}
			errs <- err
		}()
	}
	waitFor(t, "four waiting reviews", func() bool { return c.waiters(podRequest("acme", "x")) == 4 })
	close(g.release)
	for range 4 {
		if err := <-errs; !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	}
}

// TestCoalesceDeadlines gives up on a review at its own deadline, with a
// timeout, while the call goes on for the others; and the first review's
// cancellation does not fail those that joined it.
func TestCoalesceDeadlines(t *testing.T) {
	g := newGated()
	c := newCoalescer(g)
	first, cancelFirst := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Evaluate(first, podRequest("acme", "first")) })
	<-g.started
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Evaluate(short, podRequest("acme", "impatient")); !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("a review past its deadline got %v, want ErrTimeout", err)
	}
	var joined error
	wg.Go(func() { _, joined = c.Evaluate(context.Background(), podRequest("acme", "patient")) })
	waitFor(t, "the patient review waiting", func() bool { return c.waiters(podRequest("acme", "x")) == 3 })
	cancelFirst()
	time.Sleep(10 * time.Millisecond)
	close(g.release)
	wg.Wait()
	if joined != nil {
		t.Fatalf("the first review's cancellation failed a review that joined it: %v", joined)
	}
	if n := g.calls.Load(); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}

// TestCoalesceLeavesNodeRequestsAlone passes requests about nodes
// straight through: their answers depend on the nodes' evidence.
func TestCoalesceLeavesNodeRequestsAlone(t *testing.T) {
	g := newGated()
	close(g.release)
	c := newCoalescer(g)
	req := podRequest("acme", "pod")
	req.Nodes = []wire.Node{{Name: "gpu-1"}}
	for range 3 {
		if _, err := c.Evaluate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if n := g.calls.Load(); n != 3 || len(c.calls) != 0 {
		t.Fatalf("%d calls and %d shared, want 3 and 0", n, len(c.calls))
	}
}
