package admission

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	ev := &fakeEvaluator{verdict: allowVerdict(), real: localEvaluator(t)}
	v, err := New(Config{PoolLabel: pool, Cluster: newFakeCluster(), Evaluator: ev, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	send := func(p *corev1.Pod) {
		post(t, v.PodsHandler(), request(t, "pods", "", admissionv1.Create, p.Namespace, "u", p, nil))
	}
	send(makePod(tenantNS).obj())
	send(makePod(tenantNS).scheduler("other").obj())
	send(makePod(tenantNS).scheduler("other").obj())
	ev.verdict.Decision, ev.verdict.Reasons = "indeterminate", []guard.Reason{guard.ReasonNoPolicy}
	send(makePod(tenantNS).obj())

	post(t, v.PodsHandler(), request(t, "made-up-resource", "", "MADE_UP", plainNS, "u", makePod(plainNS).obj(), nil))
	ev.verdict.Decision, ev.verdict.Reasons = "deny", []guard.Reason{"INVENTED_BY_A_NEWER_EVALUATOR"}
	send(makePod(tenantNS).obj())

	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"pods", "CREATE", "allowed", "NONE"}, 1},
		{[]string{"pods", "CREATE", "denied", "SCHEDULER_NOT_ALLOWED"}, 2},
		{[]string{"pods", "CREATE", "denied", "NO_POLICY"}, 1},
		{[]string{"other", "other", "denied", "UNEXPECTED_REQUEST"}, 1},
		{[]string{"pods", "CREATE", "denied", "OTHER"}, 1},
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("requests%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if ev.calls != 3 {
		t.Errorf("evaluator asked %d times, want 3 (the pods the rules did not refuse first)", ev.calls)
	}
	if n := testutil.CollectAndCount(m.latency); n != 2 {
		t.Errorf("latency series = %d, want 2 (pods, other)", n)
	}
}
