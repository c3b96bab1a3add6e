package enforcement

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestEvidenceChanged(t *testing.T) {
	base := nodeState(poolNode("a1", acme), "boot-1").Spec
	base.TEE = &v1alpha1.TEEFacts{Type: v1alpha1.TEETDX, Attestation: &v1alpha1.Attestation{
		Verdict: v1alpha1.AttestationPassed, VerifiedAt: base.ObservedAt}}
	cases := []struct {
		name   string
		change func(s *v1alpha1.NodeSecurityStateSpec)
		want   bool
	}{
		{"nothing", func(*v1alpha1.NodeSecurityStateSpec) {}, false},
		{"routine refresh", func(s *v1alpha1.NodeSecurityStateSpec) { s.ObservedAt.Time = s.ObservedAt.Add(30 * time.Second) }, false},
		{"refresh after a silence", func(s *v1alpha1.NodeSecurityStateSpec) { s.ObservedAt.Time = s.ObservedAt.Add(11 * time.Minute) }, true},
		{"time went backwards", func(s *v1alpha1.NodeSecurityStateSpec) { s.ObservedAt.Time = s.ObservedAt.Add(-time.Second) }, true},
		{"routine re-attestation", func(s *v1alpha1.NodeSecurityStateSpec) {
			s.TEE.Attestation.VerifiedAt.Time = s.TEE.Attestation.VerifiedAt.Add(10 * time.Second)
		}, false},
		{"re-attestation after a silence", func(s *v1alpha1.NodeSecurityStateSpec) {
			s.TEE.Attestation.VerifiedAt.Time = s.TEE.Attestation.VerifiedAt.Add(2 * time.Hour)
		}, true},
		{"incarnation", func(s *v1alpha1.NodeSecurityStateSpec) { s.Incarnation = "boot-2" }, true},
		{"sharing mode", func(s *v1alpha1.NodeSecurityStateSpec) { s.Devices[0].SharingMode = v1alpha1.SharingTimeSlicing }, true},
		{"completeness", func(s *v1alpha1.NodeSecurityStateSpec) { s.Complete = false }, true},
		{"verdict", func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Attestation.Verdict = v1alpha1.AttestationFailed }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := *base.DeepCopy()
			tc.change(&n)
			if got := evidenceChanged(&base, &n); got != tc.want {
				t.Errorf("evidenceChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWake checks which pending pods each kind of change wakes.
func TestWake(t *testing.T) {
	w := acmeWorld()
	annotated := fixture.MakeNamespace("annotated").Tenant(globex).Obj()
	annotated.Annotations = map[string]string{guard.AnnotationPolicy: "strict"}
	w.namespaces = append(w.namespaces, annotated)
	bound := pod(acmeNS, "running")
	bound.Spec.NodeName = "a1"
	other := pod(acmeNS, "other-scheduler")
	other.Spec.SchedulerName = corev1.DefaultSchedulerName
	w.pods = []*corev1.Pod{pod(acmeNS, "waiting"), bound, other, pod(plain, "web"), pod("annotated", "job")}
	a1State := w.states[0]

	cases := []struct {
		name  string
		event func(a *activator)
		want  []string
	}{{
		name:  "evidence of a pool node appears",
		event: func(a *activator) { a.stateHandler().OnAdd(a1State, false) },
		want:  []string{"acme-ml/waiting"},
	}, {
		name: "evidence refreshed as usual",
		event: func(a *activator) {
			n := a1State.DeepCopy()
			n.Spec.ObservedAt = metav1.NewTime(n.Spec.ObservedAt.Add(time.Second))
			a.stateHandler().OnUpdate(a1State, n)
		},
	}, {
		name: "evidence re-incarnated",
		event: func(a *activator) {
			n := a1State.DeepCopy()
			n.Spec.Incarnation = "boot-2"
			a.stateHandler().OnUpdate(a1State, n)
		},
		want: []string{"acme-ml/waiting"},
	}, {
		name:  "evidence deleted, seen as a tombstone",
		event: func(a *activator) { a.stateHandler().OnDelete(cache.DeletedFinalStateUnknown{Key: "a1", Obj: a1State}) },
		want:  []string{"acme-ml/waiting"},
	}, {
		name: "binding changes namespaces",
		event: func(a *activator) {
			n := w.bindings[0].DeepCopy()
			n.Generation++
			n.Spec.Namespaces = []string{plain}
			a.bindingHandler().OnUpdate(w.bindings[0], n)
		},
		want: []string{"acme-ml/waiting", "default/web"},
	}, {
		name: "binding status only",
		event: func(a *activator) {
			a.bindingHandler().OnUpdate(w.bindings[0], w.bindings[0].DeepCopy())
		},
	}, {
		name: "policy changes",
		event: func(a *activator) {
			n := w.policies[0].DeepCopy()
			n.Generation++
			a.policyHandler().OnUpdate(w.policies[0], n)
		},
		want: []string{"acme-ml/waiting", "annotated/job"},
	}, {
		name: "namespace gets a tenant",
		event: func(a *activator) {
			o := fixture.MakeNamespace(plain).Obj()
			a.namespaceHandler().OnUpdate(o, fixture.MakeNamespace(plain).Tenant(acme).Obj())
		},
		want: []string{"default/web"},
	}, {
		name: "namespace changes otherwise",
		event: func(a *activator) {
			o := fixture.MakeNamespace(plain).Obj()
			a.namespaceHandler().OnUpdate(o, fixture.MakeNamespace(plain).Label("team", "web").Obj())
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := w.start(t)
			tc.event(h.pl.activate)
			got := h.activated.woken()
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("woken = %v, want %v", got, tc.want)
			}
		})
	}
}
