package backoff

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A node whose evaluation kept failing is asked again within Max of the
// last failure, however long the outage lasted; another node starts from
// Base.
func TestRateLimiterIsBounded(t *testing.T) {
	l := RateLimiter()
	node := reconcile.Request{NamespacedName: types.NamespacedName{Name: "gpu-1"}}
	var last, most = l.When(node), l.When(node)
	for range 100 {
		last = l.When(node)
		most = max(most, last)
	}
	if most > Max || last != Max {
		t.Errorf("after 100 failures the delay is %s (longest %s), want %s", last, most, Max)
	}
	// Within the overall bucket, another node starts from Base, and so
	// does the node once it succeeded.
	l = RateLimiter()
	for range 10 {
		l.When(node)
	}
	if d := l.When(reconcile.Request{NamespacedName: types.NamespacedName{Name: "gpu-2"}}); d > Base {
		t.Errorf("the first failure of another node waits %s, want at most %s", d, Base)
	}
	l.Forget(node)
	if d := l.When(node); d > Base {
		t.Errorf("after a success the next failure waits %s, want at most %s", d, Base)
	}
}
