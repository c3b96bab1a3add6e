//go:build integration

package integration

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

var (
	mock       = evidence{source: v1alpha1.SourceMock, sharing: v1alpha1.SharingExclusive, incarnation: "boot-1"}
	timeSliced = evidence{source: v1alpha1.SourceMock, sharing: v1alpha1.SharingTimeSlicing, incarnation: "boot-1"}
)

// TestIntegrationProfiles is the demo's story: mock evidence is refused
// under the production profile, accepted as simulated integration under
// lab, and a time-sliced node stays closed.
func TestIntegrationProfiles(t *testing.T) {
	t.Run("production refuses mock evidence", func(t *testing.T) {
		startScheduler(t, pluginArgs{})
		tn := newTenant(t)
		setEvidence(t, newNode(t, tn.id), mock)
		p := newPod(t, pod(tn.namespace))
		waitRefused(t, p, "SOURCE_NOT_ACCEPTED", "production profile")
	})
	t.Run("lab schedules only to the compliant node", func(t *testing.T) {
		startScheduler(t, pluginArgs{acceptMock: true})
		tn := newTenant(t)
		good, sliced := newNode(t, tn.id), newNode(t, tn.id)
		setEvidence(t, good, mock)
		setEvidence(t, sliced, timeSliced)
		newNode(t, "")
		for range 4 {
			if got := waitBound(t, newPod(t, pod(tn.namespace))); got != good.Name {
				t.Fatalf("bound to %s, want %s", got, good.Name)
			}
		}
		p := newPod(t, pod(tn.namespace).PinnedTo(sliced.Name))
		waitRefused(t, p, "TIME_SLICING_FORBIDDEN")
	})
}

// TestIntegrationPoolIsolation checks both directions: a tenant reaches its
// pool with no toleration, and no other pod reaches it, tolerations or not.
func TestIntegrationPoolIsolation(t *testing.T) {
	startScheduler(t, pluginArgs{})
	acme, globex := newTenant(t), newTenant(t)
	acmeNode, globexNode, free := newNode(t, acme.id), newNode(t, globex.id), newNode(t, "")
	setEvidence(t, acmeNode, attested)
	setEvidence(t, globexNode, attested)
	create(t, fixture.MakeNamespace("plain-"+acme.id).Obj())

	if got := waitBound(t, newPod(t, pod(acme.namespace))); got != acmeNode.Name {
		t.Errorf("acme's pod bound to %s, want its pool node %s", got, acmeNode.Name)
	}
	if got := waitBound(t, newPod(t, pod(globex.namespace))); got != globexNode.Name {
		t.Errorf("globex's pod bound to %s, want its pool node %s", got, globexNode.Name)
	}
	for i := range 3 {
		if got := waitBound(t, newPod(t, pod("plain-"+acme.id))); got != free.Name {
			t.Errorf("plain pod %d bound to %s, want the node in no pool %s", i, got, free.Name)
		}
	}
	tolerateAll := corev1.Toleration{Operator: corev1.TolerationOpExists}
	sneaky := newPod(t, pod("plain-"+acme.id).Toleration(tolerateAll).PinnedTo(acmeNode.Name))
	waitRefused(t, sneaky, "TENANT_MISMATCH", "belongs to no tenant")
	intruder := newPod(t, pod(globex.namespace).Toleration(tolerateAll).PinnedTo(acmeNode.Name))
	waitRefused(t, intruder, "didn't satisfy plugin(s) [XilaGuardEnforcement]")
}

// TestIntegrationEvidenceChangeWakesPod checks that a pod refused on its
// node's evidence is scheduled as soon as the evidence is fixed.
func TestIntegrationEvidenceChangeWakesPod(t *testing.T) {
	startScheduler(t, pluginArgs{})
	tn := newTenant(t)
	node := newNode(t, tn.id)
	sliced := attested
	sliced.sharing = v1alpha1.SharingTimeSlicing
	setEvidence(t, node, sliced)
	p := newPod(t, pod(tn.namespace))
	// PostFilter names the refused node after the scheduler's summary.
	waitRefused(t, p, "TIME_SLICING_FORBIDDEN", "Xila Guard refused TIME_SLICING_FORBIDDEN: "+node.Name)

	start := time.Now()
	setEvidence(t, node, attested)
	waitBound(t, p)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("pod scheduled %s after its evidence was fixed; the plugin should wake it at once", took)
	}
}
