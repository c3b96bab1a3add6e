//go:build integration

package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// TestIntegrationBoundEvidence: a pod the controlled scheduler binds on
// its node's evidence carries, by the time it is bound, the node UID and
// the incarnation of the NodeSecurityState it was judged on; a pod bound
// to a node without evidence (confinement Any) carries none.
func TestIntegrationBoundEvidence(t *testing.T) {
	t.Run("G-BOUND-EVIDENCE a bound pod records the evidence it was judged on", testBoundEvidence)
}

func testBoundEvidence(t *testing.T) {
	startScheduler(t, pluginArgs{})
	tn := newTenant(t)
	node, free := newNode(t, tn.id), newNode(t, "")
	rebooted := attested
	rebooted.incarnation = "boot-42"
	setEvidence(t, node, rebooted)

	p := newPod(t, pod(tn.namespace))
	if got := waitBound(t, p); got != node.Name {
		t.Fatalf("bound to %s, want %s", got, node.Name)
	}
	if got, want := record(t, p), guard.BoundEvidence(string(node.UID), "boot-42"); got != want {
		t.Errorf("bound pod's %s = %q, want %q", guard.AnnotationBoundEvidence, got, want)
	}

	var policy v1alpha1.PlacementPolicy
	ctx := context.Background()
	if err := k8s.Get(ctx, client.ObjectKey{Name: tn.policy}, &policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Confinement = v1alpha1.ConfinementAny
	if err := k8s.Update(ctx, &policy); err != nil {
		t.Fatal(err)
	}
	unguarded := newPod(t, pod(tn.namespace).PinnedTo(free.Name))
	if got := waitBound(t, unguarded); got != free.Name {
		t.Fatalf("bound to %s, want %s", got, free.Name)
	}
	if got := record(t, unguarded); got != "" {
		t.Errorf("a pod bound to a node without evidence carries %s=%q", guard.AnnotationBoundEvidence, got)
	}
}

// record returns the pod's bound-evidence annotation, "" without one.
func record(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	got, err := kube.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	return got.Annotations[guard.AnnotationBoundEvidence]
}
