package resolve

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// world is a Lookup over fixed objects; a non-nil error field makes that
// read fail.
type world struct {
	bindings  []*v1alpha1.TenantBinding
	policies  []*v1alpha1.PlacementPolicy
	listErr   error
	policyErr error
}

func (w *world) Listing(namespace string) ([]*v1alpha1.TenantBinding, error) {
	var out []*v1alpha1.TenantBinding
	for _, b := range w.bindings {
		if slices.Contains(b.Spec.Namespaces, namespace) {
			out = append(out, b)
		}
	}
	return out, w.listErr
}

func (w *world) PlacementPolicy(name string) (*v1alpha1.PlacementPolicy, error) {
	return named(w.policies, name, w.policyErr)
}

// named returns the object of that name, nil when there is none, and err
// instead when it is set.
func named[T metav1.Object](objs []T, name string, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	for _, o := range objs {
		if o.GetName() == name {
			return o, nil
		}
	}
	return zero, nil
}

var _ Lookup = (*world)(nil)

func binding(tenant, pool, policy string, namespaces ...string) *v1alpha1.TenantBinding {
	b := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: tenant},
		Spec: v1alpha1.TenantBindingSpec{TenantID: tenant, NodePool: pool, Namespaces: namespaces}}
	if policy != "" {
		b.Spec.EffectivePolicyRef = &v1alpha1.PolicyReference{Name: policy}
	}
	return b
}

func policy(name string) *v1alpha1.PlacementPolicy {
	return &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func namespace(name string, labels, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
}

func labelled(name, tenant string) *corev1.Namespace {
	return namespace(name, map[string]string{guard.LabelTenant: tenant}, nil)
}

func annotated(ns *corev1.Namespace, policy string) *corev1.Namespace {
	ns.Annotations = map[string]string{guard.AnnotationPolicy: policy}
	return ns
}

// got is what a test compares: the identity with the policy by name.
type got struct {
	Protected bool
	Tenant    *Tenant
	Policy    string
	Note      string
}

func TestNamespace(t *testing.T) {
	policies := []*v1alpha1.PlacementPolicy{policy("strict"), policy("lenient")}
	cases := []struct {
		name     string
		ns       *corev1.Namespace
		bindings []*v1alpha1.TenantBinding
		want     got
	}{{
		name: "plain namespace is not protected",
		ns:   namespace("default", nil, nil),
		want: got{},
	}, {
		name:     "plain namespace with bindings elsewhere is not protected",
		ns:       namespace("default", nil, nil),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "", "strict", "acme-ml")},
		want:     got{},
	}, {
		name:     "listed by a binding",
		ns:       namespace("acme-ml", nil, nil),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "acme-gpus", "strict", "acme-ml")},
		want:     got{Protected: true, Tenant: &Tenant{ID: "acme", Pool: "acme-gpus"}, Policy: "strict"},
	}, {
		name:     "listed and labelled alike",
		ns:       labelled("acme-ml", "acme"),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "", "strict", "acme-ml")},
		want:     got{Protected: true, Tenant: &Tenant{ID: "acme", Pool: "acme"}, Policy: "strict"},
	}, {
		name:     "labelled, binding of the tenant lists other namespaces: only a listing names a tenant",
		ns:       labelled("acme-extra", "acme"),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "acme-gpus", "strict", "acme-ml")},
		want: got{Protected: true,
			Note: "namespace acme-extra is labelled guard.xila.us/tenant=acme but no TenantBinding lists it; only a TenantBinding's namespaces name a tenant"},
	}, {
		name:     "labelled, binding of the tenant lists no namespace",
		ns:       labelled("acme-ml", "acme"),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "acme-pool", "strict")},
		want: got{Protected: true,
			Note: "namespace acme-ml is labelled guard.xila.us/tenant=acme but no TenantBinding lists it; only a TenantBinding's namespaces name a tenant"},
	}, {
		name: "labelled, no binding, annotation names a policy: still unresolved",
		ns:   annotated(labelled("acme-ml", "acme"), "lenient"),
		want: got{Protected: true,
			Note: "namespace acme-ml is labelled guard.xila.us/tenant=acme but no TenantBinding lists it; only a TenantBinding's namespaces name a tenant"},
	}, {
		name:     "binding reference wins over the annotation",
		ns:       annotated(labelled("acme-ml", "acme"), "lenient"),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "", "strict", "acme-ml")},
		want:     got{Protected: true, Tenant: &Tenant{ID: "acme", Pool: "acme"}, Policy: "strict"},
	}, {
		name:     "annotation is the fallback when the listing binding has no reference",
		ns:       annotated(namespace("acme-ml", nil, nil), "lenient"),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "", "", "acme-ml")},
		want:     got{Protected: true, Tenant: &Tenant{ID: "acme", Pool: "acme"}, Policy: "lenient"},
	}, {
		name:     "binding without a reference and no annotation",
		ns:       labelled("beta-ml", "beta"),
		bindings: []*v1alpha1.TenantBinding{binding("beta", "", "", "beta-ml")},
		want: got{Protected: true, Tenant: &Tenant{ID: "beta", Pool: "beta"},
			Note: "TenantBinding beta has no effectivePolicyRef and the namespace no guard.xila.us/policy annotation"},
	}, {
		name:     "annotation names a missing policy",
		ns:       annotated(labelled("acme-ml", "acme"), "gone"),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "", "", "acme-ml")},
		want: got{Protected: true, Tenant: &Tenant{ID: "acme", Pool: "acme"},
			Note: "PlacementPolicy gone, named by the guard.xila.us/policy annotation of namespace acme-ml, does not exist"},
	}, {
		name:     "binding names a missing policy",
		ns:       namespace("acme-ml", nil, nil),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "", "gone", "acme-ml")},
		want: got{Protected: true, Tenant: &Tenant{ID: "acme", Pool: "acme"},
			Note: "PlacementPolicy gone, named by TenantBinding acme, does not exist"},
	}, {
		name:     "two bindings list the namespace",
		ns:       namespace("acme-ml", nil, nil),
		bindings: []*v1alpha1.TenantBinding{binding("globex", "", "strict", "acme-ml"), binding("acme", "", "strict", "acme-ml")},
		want:     got{Protected: true, Note: "namespace acme-ml is listed by several TenantBindings (acme, globex)"},
	}, {
		name:     "two bindings list a labelled namespace",
		ns:       labelled("acme-ml", "acme"),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "acme-pool", "strict", "acme-ml"), binding("beta", "", "", "acme-ml")},
		want:     got{Protected: true, Note: "namespace acme-ml is listed by several TenantBindings (acme, beta)"},
	}, {
		name:     "label contradicts the binding",
		ns:       labelled("acme-ml", "globex"),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "", "strict", "acme-ml"), binding("globex", "", "strict")},
		want:     got{Protected: true, Note: "namespace acme-ml is labelled guard.xila.us/tenant=globex but listed by the TenantBinding of tenant acme"},
	}, {
		name: "empty label",
		ns:   labelled("acme-ml", ""),
		want: got{Protected: true,
			Note: "namespace acme-ml is labelled guard.xila.us/tenant= but no TenantBinding lists it; only a TenantBinding's namespaces name a tenant"},
	}, {
		name:     "empty label on a listed namespace contradicts the binding",
		ns:       labelled("acme-ml", ""),
		bindings: []*v1alpha1.TenantBinding{binding("acme", "", "strict", "acme-ml")},
		want:     got{Protected: true, Note: "namespace acme-ml is labelled guard.xila.us/tenant= but listed by the TenantBinding of tenant acme"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := Namespace(tc.ns, &world{bindings: tc.bindings, policies: policies})
			if err != nil {
				t.Fatalf("Namespace: %v", err)
			}
			g := got{Protected: id.Protected, Tenant: id.Tenant, Note: id.Note}
			if id.Policy != nil {
				g.Policy = id.Policy.Name
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNamespaceLookupErrors checks that a read that fails is an error and
// never a guess: no identity, protected or not, comes with it.
func TestNamespaceLookupErrors(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name  string
		ns    *corev1.Namespace
		world world
	}{{
		name:  "listing fails",
		ns:    namespace("default", nil, nil),
		world: world{listErr: boom},
	}, {
		name:  "reading the policy fails",
		ns:    namespace("acme-ml", nil, nil),
		world: world{bindings: []*v1alpha1.TenantBinding{binding("acme", "", "strict", "acme-ml")}, policyErr: boom},
	}, {
		name:  "reading the annotated policy fails",
		ns:    annotated(labelled("acme-ml", "acme"), "strict"),
		world: world{bindings: []*v1alpha1.TenantBinding{binding("acme", "", "", "acme-ml")}, policyErr: boom},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := Namespace(tc.ns, &tc.world)
			if !errors.Is(err, boom) {
				t.Fatalf("error = %v, want %v", err, boom)
			}
			if diff := cmp.Diff(Identity{}, id); diff != "" {
				t.Errorf("identity with an error (-want +got):\n%s", diff)
			}
		})
	}
}
