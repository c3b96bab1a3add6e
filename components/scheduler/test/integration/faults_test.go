//go:build integration

package integration

import (
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// TestIntegrationEvaluatorFaults makes the evaluator slow beyond the
// timeout, unreachable, answer 500, answer garbage and leave a node out of
// its answer: each time the protected pod stays unbound with the fault's
// reason code, and once the evaluator recovers it is scheduled without
// anyone touching it.
func TestIntegrationEvaluatorFaults(t *testing.T) {
	ev := newFaultyEvaluator(t, startCore(t, guard.ProfileProduction))
	startScheduler(t, pluginArgs{coreURL: ev.URL(), timeout: 300 * time.Millisecond})
	tn := newTenant(t)
	node := newNode(t, tn.id)
	setEvidence(t, node, attested)
	newNode(t, "")

	cases := []struct {
		name   string
		inject func()
		want   string
	}{
		{"slow beyond the timeout", func() { ev.set(slow) }, "EVALUATOR_TIMEOUT"},
		{"down", ev.down, "EVALUATOR_UNAVAILABLE"},
		{"500", func() { ev.set(erroring) }, "EVALUATOR_ERROR"},
		{"malformed", func() { ev.set(garbage) }, "EVALUATOR_ERROR"},
		{"missing node", func() { ev.set(dropsNode) }, "EVALUATOR_ERROR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.inject()
			p := newPod(t, tn.namespace)
			waitRefused(t, p, tc.want, "no node is allowed")
			stayPending(t, p, time.Second)

			ev.set(healthy)
			if tc.name == "down" {
				ev.up()
			}
			if got := waitBound(t, p); got != node.Name {
				t.Errorf("bound to %s, want the pool node %s", got, node.Name)
			}
		})
	}
}
