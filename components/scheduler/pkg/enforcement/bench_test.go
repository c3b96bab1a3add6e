package enforcement

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// largeWorld is acme's namespace and policy with pool nodes in acme's
// pool, each offering eight GPUs with complete, attested evidence of eight
// exclusive, CC-on devices, and free nodes in no pool.
func largeWorld(pool, free int) world {
	w := acmeWorld()
	w.nodes, w.states = nil, nil
	w.policies[0].Spec.Evidence.MaxAge = &metav1.Duration{Duration: 24 * time.Hour}
	for i := range pool {
		n := offering(poolNode(fmt.Sprintf("a%04d", i), acme), map[corev1.ResourceName]string{guard.ResourceGPU: "8"})
		s := nodeState(n, "boot-1")
		s.ResourceVersion = "1"
		s.Spec.Devices = make([]v1alpha1.GPUDevice, 8)
		for d := range s.Spec.Devices {
			s.Spec.Devices[d] = v1alpha1.GPUDevice{ID: fmt.Sprintf("gpu-%d", d), Vendor: "nvidia", Model: "NVIDIA-H100-80GB-HBM3",
				SharingMode: v1alpha1.SharingExclusive, CCMode: v1alpha1.CCModeOn}
		}
		w.nodes, w.states = append(w.nodes, n), append(w.states, s)
	}
	for i := range free {
		w.nodes = append(w.nodes, node(fmt.Sprintf("n%04d", i)))
	}
	return w
}

// BenchmarkPreFilter measures PreFilter for a protected pod in a cluster
// of 1,000 nodes of the tenant's pool (largeWorld) and 1,000 in no pool,
// with the real evaluator: "reuse" with the default answer reuse, which
// finds a recent answer about the identical snapshot in almost every
// cycle, "every-cycle" with answerReuse 0, which has the evaluator judge
// the pool in each.
func BenchmarkPreFilter(b *testing.B) {
	for _, bc := range []struct {
		name  string
		reuse time.Duration
	}{{"reuse", DefaultAnswerReuse}, {"every-cycle", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			h := largeWorld(1000, 1000).start(b)
			h.pl.eval = h.eval.next // the recorder would keep every request
			h.pl.answers.window = bc.reuse
			nodes, err := h.snapshot.NodeInfos().List()
			if err != nil {
				b.Fatal(err)
			}
			p := pod(acmeNS, "train")
			ctx := context.Background()
			cs := framework.NewCycleState()
			if _, s := h.pl.PreFilter(ctx, cs, p, nodes); !s.IsSuccess() {
				b.Fatal(s)
			}
			if st, err := readState(cs); err != nil || st.judged["a0999"].decision != guard.DecisionAllow {
				b.Fatalf("the pool is not allowed: %v", err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res, s := h.pl.PreFilter(ctx, framework.NewCycleState(), p, nodes)
				if !s.IsSuccess() || res.NodeNames.Len() != 1000 {
					b.Fatalf("PreFilter: %v, %d nodes", s, res.NodeNames.Len())
				}
			}
		})
	}
}
