package compliance

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// TestNext checks when a node is looked at again: when its evidence
// outlives the shortest maxAge of its policies, if that comes before the
// resync period.
func TestNext(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	policy := func(maxAge time.Duration) Subject {
		p := &wire.Policy{Name: "p"}
		if maxAge > 0 {
			p.Spec.Evidence.MaxAge = &metav1.Duration{Duration: maxAge}
		}
		return Subject{Policy: p}
	}
	observed := func(ago time.Duration) wire.Node {
		return wire.Node{Name: "n", State: &v1alpha1.NodeSecurityStateSpec{ObservedAt: metav1.NewTime(now.Add(-ago))}}
	}
	cases := []struct {
		name     string
		subjects map[string][]Subject
		node     wire.Node
		want     time.Duration
	}{
		{"no state: resync", map[string][]Subject{"a": {policy(time.Minute)}}, wire.Node{Name: "n"}, DefaultResync},
		{"no policies: resync", nil, observed(0), DefaultResync},
		{"expires before the resync", map[string][]Subject{"a": {policy(30 * time.Second)}}, observed(10 * time.Second), 21 * time.Second},
		{"shortest maxAge wins", map[string][]Subject{"a": {policy(50 * time.Second)}, "b": {policy(20 * time.Second)}}, observed(10 * time.Second), 11 * time.Second},
		{"default maxAge beyond the resync", map[string][]Subject{"a": {policy(0)}}, observed(0), DefaultResync},
		{"already stale: resync", map[string][]Subject{"a": {policy(time.Second)}}, observed(time.Minute), DefaultResync},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &Labeller{Clock: clocktesting.NewFakePassiveClock(now)}
			if got := l.next(tc.subjects, tc.node); got != tc.want {
				t.Errorf("next = %s, want %s", got, tc.want)
			}
		})
	}
}
