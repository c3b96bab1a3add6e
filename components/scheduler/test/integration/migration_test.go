//go:build integration

package integration

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
)

// migrationTarget makes p the way KubeVirt's controller makes a
// migration's target pod for the VMI whose launcher carries createdBy:
// labelled with the migration's UID, the migration's addedNodeSelector
// (the tenant's pool) as its node selector, and kept off the source
// launcher's node by pod anti-affinity.
func migrationTarget(p *fixture.PodWrapper, pool, createdBy string) *fixture.PodWrapper {
	launcher(p, createdBy).Label("kubevirt.io/migrationJobUID", rand.String(8)).NodeSelector(guard.LabelTenantPool, pool)
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubevirt.io/created-by": createdBy}},
			TopologyKey:   corev1.LabelHostname,
		}}}}
	return p
}

// launcher makes p the source launcher pod of a VMI.
func launcher(p *fixture.PodWrapper, createdBy string) *fixture.PodWrapper {
	return p.Label("kubevirt.io", "virt-launcher").Label("kubevirt.io/created-by", createdBy)
}

// TestIntegrationMigrationTarget: the target pod of a migration of a
// protected VMI, with the migration's pool constraint, is judged like any
// protected pod: it binds only to a node of the tenant's pool whose
// attested evidence is fresh and satisfies the policy, and carries that
// node's evidence as its bound-evidence record, which is what the key
// broker releases its keys against. Nodes of its pool with stale evidence
// and nodes of another pool are never chosen.
func TestIntegrationMigrationTarget(t *testing.T) {
	startScheduler(t, pluginArgs{})
	t.Run("G-MIGRATION-TARGET binds to the fresh node of its pool", func(t *testing.T) {
		tn, other := newTenant(t), newTenant(t)
		source, fresh, stale, foreign := newNode(t, tn.id), newNode(t, tn.id), newNode(t, tn.id), newNode(t, other.id)
		newNode(t, "")
		setEvidence(t, source, attested)
		fresh2 := attested
		fresh2.incarnation = "boot-7"
		setEvidence(t, fresh, fresh2)
		old := attested
		old.observedAt = time.Now().Add(-time.Hour)
		setEvidence(t, stale, old)
		setEvidence(t, foreign, attested)

		vmi := "vmi-" + rand.String(6)
		src := newPod(t, launcher(pod(tn.namespace), vmi).PinnedTo(source.Name))
		if got := waitBound(t, src); got != source.Name {
			t.Fatalf("source launcher bound to %s, want %s", got, source.Name)
		}
		// One target per migration: a second one would be kept off the
		// first by the same anti-affinity.
		p := newPod(t, migrationTarget(pod(tn.namespace), tn.id, vmi))
		if got := waitBound(t, p); got != fresh.Name {
			t.Fatalf("target pod bound to %s, want the fresh node of its pool %s (source %s, stale %s, other pool %s)",
				got, fresh.Name, source.Name, stale.Name, foreign.Name)
		}
		if got, want := record(t, p), guard.BoundEvidence(string(fresh.UID), "boot-7"); got != want {
			t.Errorf("target pod's %s = %q, want %q", guard.AnnotationBoundEvidence, got, want)
		}
	})
	t.Run("G-MIGRATION-TARGET waits while its pool has no fresh node", func(t *testing.T) {
		tn, other := newTenant(t), newTenant(t)
		source, stale, foreign := newNode(t, tn.id), newNode(t, tn.id), newNode(t, other.id)
		setEvidence(t, source, attested)
		old := attested
		old.observedAt = time.Now().Add(-time.Hour)
		setEvidence(t, stale, old)
		setEvidence(t, foreign, attested)

		vmi := "vmi-" + rand.String(6)
		if got := waitBound(t, newPod(t, launcher(pod(tn.namespace), vmi).PinnedTo(source.Name))); got != source.Name {
			t.Fatalf("source launcher bound to %s, want %s", got, source.Name)
		}
		p := newPod(t, migrationTarget(pod(tn.namespace), tn.id, vmi))
		waitRefused(t, p, "EVIDENCE_STALE")
		stayPending(t, p, 2*time.Second)

		// Fresh attestation of the node lets the migration proceed there.
		renewed := attested
		renewed.incarnation = "boot-2"
		setEvidence(t, stale, renewed)
		if got := waitBound(t, p); got != stale.Name {
			t.Fatalf("target pod bound to %s, want %s once attested again", got, stale.Name)
		}
		if got, want := record(t, p), guard.BoundEvidence(string(stale.UID), "boot-2"); got != want {
			t.Errorf("target pod's %s = %q, want %q", guard.AnnotationBoundEvidence, got, want)
		}
	})
}
