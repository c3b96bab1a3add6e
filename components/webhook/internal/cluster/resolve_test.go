package cluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestResolve(t *testing.T) {
	tb := func(id, pool, policy string) *v1alpha1.TenantBinding {
		b := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: v1alpha1.TenantBindingSpec{TenantID: id, NodePool: pool}}
		if policy != "" {
			b.Spec.EffectivePolicyRef = &v1alpha1.PolicyReference{Name: policy}
		}
		return b
	}
	bindings := map[string]*v1alpha1.TenantBinding{"acme": tb("acme", "acme-pool", "strict"), "beta": tb("beta", "", "")}
	policies := map[string]*v1alpha1.PlacementPolicy{"strict": {ObjectMeta: metav1.ObjectMeta{Name: "strict"}}, "loose": {ObjectMeta: metav1.ObjectMeta{Name: "loose"}}}
	ns := func(labels, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: labels, Annotations: annotations}}
	}
	cases := []struct {
		name      string
		ns        *corev1.Namespace
		listing   []*v1alpha1.TenantBinding
		protected bool
		tenant    string // "" when unresolved
		pool      string
		policy    string
		note      string
	}{
		{name: "plain", ns: ns(nil, nil)},
		{name: "listed", ns: ns(nil, nil), listing: []*v1alpha1.TenantBinding{bindings["acme"]}, protected: true, tenant: "acme", pool: "acme-pool", policy: "strict"},
		{name: "labelled with binding", ns: ns(map[string]string{guard.LabelTenant: "acme"}, nil), protected: true, tenant: "acme", pool: "acme-pool", policy: "strict"},
		{name: "labelled without binding, annotated policy", ns: ns(map[string]string{guard.LabelTenant: "ghost"}, map[string]string{guard.AnnotationPolicy: "loose"}),
			protected: true, tenant: "ghost", pool: "ghost", policy: "loose"},
		{name: "binding without ref falls back to annotation", ns: ns(map[string]string{guard.LabelTenant: "beta"}, map[string]string{guard.AnnotationPolicy: "loose"}),
			protected: true, tenant: "beta", pool: "beta", policy: "loose"},
		{name: "binding ref wins over annotation", ns: ns(map[string]string{guard.LabelTenant: "acme"}, map[string]string{guard.AnnotationPolicy: "loose"}),
			protected: true, tenant: "acme", pool: "acme-pool", policy: "strict"},
		{name: "no policy", ns: ns(map[string]string{guard.LabelTenant: "beta"}, nil), protected: true, tenant: "beta", pool: "beta", note: "no TenantBinding with an effectivePolicyRef"},
		{name: "missing policy", ns: ns(map[string]string{guard.LabelTenant: "ghost"}, map[string]string{guard.AnnotationPolicy: "gone"}), protected: true, tenant: "ghost", pool: "ghost", note: "gone"},
		{name: "two bindings", ns: ns(nil, nil), listing: []*v1alpha1.TenantBinding{bindings["acme"], bindings["beta"]}, protected: true, note: "several TenantBindings (acme, beta)"},
		{name: "label contradicts binding", ns: ns(map[string]string{guard.LabelTenant: "beta"}, nil), listing: []*v1alpha1.TenantBinding{bindings["acme"]}, protected: true, note: "but listed by"},
		{name: "empty label", ns: ns(map[string]string{guard.LabelTenant: ""}, nil), protected: true, note: "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := Resolve(tc.ns, tc.listing, func(n string) *v1alpha1.TenantBinding { return bindings[n] },
				func(n string) *v1alpha1.PlacementPolicy { return policies[n] })
			if id.Protected != tc.protected {
				t.Fatalf("protected = %v, want %v", id.Protected, tc.protected)
			}
			switch {
			case tc.tenant == "" && id.Tenant != nil:
				t.Errorf("tenant %+v, want unresolved", id.Tenant)
			case tc.tenant != "" && (id.Tenant == nil || id.Tenant.ID != tc.tenant || id.Tenant.PoolName() != tc.pool):
				t.Errorf("tenant %+v, want %s in pool %s", id.Tenant, tc.tenant, tc.pool)
			}
			switch {
			case tc.policy == "" && id.Policy != nil:
				t.Errorf("policy %s, want none", id.Policy.Name)
			case tc.policy != "" && (id.Policy == nil || id.Policy.Name != tc.policy):
				t.Errorf("policy %+v, want %s", id.Policy, tc.policy)
			}
			if !strings.Contains(id.Note, tc.note) {
				t.Errorf("note %q lacks %q", id.Note, tc.note)
			}
		})
	}
}
