//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
	"github.com/xila-guard/xila-guard/components/observe/compliance"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

// failing is an evaluator that can be made to fail, as a remote one does
// when its service is down.
type failing struct {
	postbind.Evaluator
	down atomic.Bool
}

func (f *failing) Evaluate(ctx context.Context, req *wire.EvaluateRequest) (wire.NodeResult, error) {
	if f.down.Load() {
		return wire.NodeResult{}, errors.New("evaluator unavailable")
	}
	return f.Evaluator.Evaluate(ctx, req)
}

// complianceLabels returns the node's compliance labels.
func complianceLabels(name string) (map[string]string, error) {
	n := &corev1.Node{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range n.Labels {
		if strings.HasPrefix(k, guard.ComplianceLabelPrefix) {
			out[k] = v
		}
	}
	return out, nil
}

// TestIntegrationComplianceLabels runs the publisher and the compliance
// labeller against a real API server: a node carries its pool's policies'
// labels exactly while the evaluator allows them there, and loses them when
// the evidence changes, goes stale, the policy changes or the evaluator
// cannot answer; a forged label is taken away.
func TestIntegrationComplianceLabels(t *testing.T) {
	ctx := context.Background()
	eval, err := evaluate.New(evaluate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := &failing{Evaluator: postbind.Local{Evaluator: eval}}
	startManager(t, func(mgr ctrl.Manager) error {
		if err := (&evidence.Publisher{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&compliance.Labeller{Client: mgr.GetClient(), Evaluator: ev}).SetupWithManager(mgr, 2)
	})
	const exclusive, open, anywhere = "globex-exclusive", "initech-open", "hooli-anywhere"
	create(t,
		fixture.MakeNamespace("globex-train").Obj(),
		fixture.MakePlacementPolicy(exclusive, v1alpha1.SourceNFD).ForbidSharing(v1alpha1.SharingTimeSlicing).Obj(),
		fixture.MakeTenantBinding("globex", "globex-train").Policy(exclusive).Obj(),
		fixture.MakePlacementPolicy(open, v1alpha1.SourceNFD).MaxAge(10*time.Second).Obj(),
		// The namespace does not exist yet: its pods, once it does, answer
		// to the binding's policy.
		fixture.MakeTenantBinding("initech", "initech-batch").Policy(open).Obj(),
		fixture.MakePlacementPolicy(anywhere, v1alpha1.SourceNFD).Confinement(v1alpha1.ConfinementAny).Obj(),
		fixture.MakeTenantBinding("hooli", "hooli-web").Policy(anywhere).Obj(),
	)
	gpu := func(pool, sharing string) map[string]string {
		l := map[string]string{evidence.LabelGPUCount: "1", evidence.LabelGPUProduct: "NVIDIA-H100", evidence.LabelSharingStrategy: sharing}
		if pool != "" {
			l[guard.LabelTenantPool] = pool
		}
		return l
	}
	createNode(t, "cl-good", gpu("globex", "none"), "b1")
	createNode(t, "cl-shared", gpu("globex", "time-slicing"), "b1")
	createNode(t, "cl-initech", gpu("initech", "none"), "b1")
	createNode(t, "cl-general", gpu("", "none"), "b1")
	key := func(policy string) string { return guard.ComplianceLabelPrefix + policy }
	expect := func(t *testing.T, timeout time.Duration, node string, want map[string]string) {
		t.Helper()
		eventually(t, timeout, func() error {
			got, err := complianceLabels(node)
			if err != nil {
				return err
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("node %s has compliance labels %v, want %v", node, got, want)
			}
			return nil
		})
	}
	yes := guard.ComplianceLabelValue

	t.Run("each node carries the labels of the policies that allow it", func(t *testing.T) {
		expect(t, 10*time.Second, "cl-good", map[string]string{key(exclusive): yes})
		// Time-sliced: refused by globex's policy; other pools' and
		// confinement Any's policies never name a pool node of globex.
		expect(t, 5*time.Second, "cl-shared", map[string]string{})
		expect(t, 5*time.Second, "cl-initech", map[string]string{key(open): yes})
		// A node in no pool is open only to confinement Any.
		expect(t, 5*time.Second, "cl-general", map[string]string{key(anywhere): yes})
	})
	t.Run("evidence flipped to time-slicing takes the label away, and back", func(t *testing.T) {
		patchNode(t, "cl-good", func(n *corev1.Node) { n.Labels[evidence.LabelSharingStrategy] = "time-slicing" })
		expect(t, 5*time.Second, "cl-good", map[string]string{})
		patchNode(t, "cl-good", func(n *corev1.Node) { n.Labels[evidence.LabelSharingStrategy] = "none" })
		expect(t, 5*time.Second, "cl-good", map[string]string{key(exclusive): yes})
	})
	t.Run("G-COMPLIANCE-LABELS a forged label is taken away, a removed one put back", func(t *testing.T) {
		patchNode(t, "cl-shared", func(n *corev1.Node) { n.Labels[key(exclusive)] = yes })
		expect(t, 5*time.Second, "cl-shared", map[string]string{})
		patchNode(t, "cl-good", func(n *corev1.Node) { delete(n.Labels, key(exclusive)) })
		expect(t, 5*time.Second, "cl-good", map[string]string{key(exclusive): yes})
	})
	t.Run("a policy edit relabels the pool", func(t *testing.T) {
		p := &v1alpha1.PlacementPolicy{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: exclusive}, p); err != nil {
			t.Fatal(err)
		}
		p.Spec.GPUSharing = nil
		if err := k8s.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		expect(t, 5*time.Second, "cl-shared", map[string]string{key(exclusive): yes})
	})
	t.Run("an evaluator that cannot answer takes the labels away", func(t *testing.T) {
		ev.down.Store(true)
		// Any change of the node makes the labeller look again.
		patchNode(t, "cl-shared", func(n *corev1.Node) { n.Labels["example.com/touch"] = "1" })
		expect(t, 5*time.Second, "cl-shared", map[string]string{})
		ev.down.Store(false)
		expect(t, 10*time.Second, "cl-shared", map[string]string{key(exclusive): yes})
	})
	t.Run("stale evidence takes the label away at maxAge, fresh evidence puts it back", func(t *testing.T) {
		// No GPU feature discovery timestamp: the facts were confirmed when
		// the publisher first read them, and go stale 10 s later.
		expect(t, 20*time.Second, "cl-initech", map[string]string{})
		patchNode(t, "cl-initech", func(n *corev1.Node) {
			n.Labels[evidence.LabelGFDTimestamp] = strconv.FormatInt(time.Now().Unix(), 10)
		})
		expect(t, 5*time.Second, "cl-initech", map[string]string{key(open): yes})
	})
	t.Run("a binding that goes takes its policy's labels with it", func(t *testing.T) {
		if err := k8s.Delete(ctx, &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: "hooli"}}); err != nil {
			t.Fatal(err)
		}
		expect(t, 5*time.Second, "cl-general", map[string]string{})
	})
}
