package enforcement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

func TestResolveIdentity(t *testing.T) {
	strict := placementPolicy("strict", v1alpha1.ConfinementPool)
	lenient := placementPolicy("lenient", v1alpha1.ConfinementAny)
	pooled := tenantBinding(acme, []string{acmeNS}, "strict")
	pooled.Spec.NodePool = "acme-gpus"
	annotated := func(ns *corev1.Namespace, policy string) *corev1.Namespace {
		ns.Annotations = map[string]string{guard.AnnotationPolicy: policy}
		return ns
	}
	type got struct {
		Protected bool
		Tenant    *wire.Tenant
		Policy    string
		Note      string
	}
	cases := []struct {
		name     string
		ns       *corev1.Namespace
		bindings []*v1alpha1.TenantBinding
		want     got
	}{{
		name: "plain namespace is not protected",
		ns:   namespace(plain, nil, nil),
		want: got{},
	}, {
		name:     "listed by a binding",
		ns:       namespace(acmeNS, nil, nil),
		bindings: []*v1alpha1.TenantBinding{pooled},
		want:     got{Protected: true, Tenant: &wire.Tenant{ID: acme, Pool: "acme-gpus"}, Policy: "strict"},
	}, {
		name:     "listed and labelled alike",
		ns:       tenantNS(acmeNS, acme),
		bindings: []*v1alpha1.TenantBinding{tenantBinding(acme, []string{acmeNS}, "strict")},
		want:     got{Protected: true, Tenant: &wire.Tenant{ID: acme, Pool: acme}, Policy: "strict"},
	}, {
		name:     "labelled, binding of the tenant lists other namespaces",
		ns:       tenantNS("acme-extra", acme),
		bindings: []*v1alpha1.TenantBinding{pooled},
		want:     got{Protected: true, Tenant: &wire.Tenant{ID: acme, Pool: "acme-gpus"}, Policy: "strict"},
	}, {
		name: "labelled, no binding: annotation names the policy",
		ns:   annotated(tenantNS(acmeNS, acme), "lenient"),
		want: got{Protected: true, Tenant: &wire.Tenant{ID: acme}, Policy: "lenient"},
	}, {
		name:     "binding reference wins over the annotation",
		ns:       annotated(tenantNS(acmeNS, acme), "lenient"),
		bindings: []*v1alpha1.TenantBinding{tenantBinding(acme, []string{acmeNS}, "strict")},
		want:     got{Protected: true, Tenant: &wire.Tenant{ID: acme, Pool: acme}, Policy: "strict"},
	}, {
		name:     "annotation is the fallback when the binding has no reference",
		ns:       annotated(namespace(acmeNS, nil, nil), "lenient"),
		bindings: []*v1alpha1.TenantBinding{tenantBinding(acme, []string{acmeNS}, "")},
		want:     got{Protected: true, Tenant: &wire.Tenant{ID: acme, Pool: acme}, Policy: "lenient"},
	}, {
		name: "no policy anywhere",
		ns:   tenantNS(acmeNS, acme),
		want: got{Protected: true, Tenant: &wire.Tenant{ID: acme},
			Note: "the tenant has no TenantBinding with an effectivePolicyRef and the namespace no guard.xila.us/policy annotation"},
	}, {
		name: "annotation names a missing policy",
		ns:   annotated(tenantNS(acmeNS, acme), "gone"),
		want: got{Protected: true, Tenant: &wire.Tenant{ID: acme},
			Note: "PlacementPolicy gone, named by the guard.xila.us/policy annotation of namespace acme-ml, does not exist"},
	}, {
		name:     "two bindings list the namespace",
		ns:       namespace(acmeNS, nil, nil),
		bindings: []*v1alpha1.TenantBinding{tenantBinding(globex, []string{acmeNS}, "strict"), tenantBinding(acme, []string{acmeNS}, "strict")},
		want:     got{Protected: true, Note: "namespace acme-ml is listed by several TenantBindings (acme, globex)"},
	}, {
		name:     "label contradicts the binding",
		ns:       tenantNS(acmeNS, globex),
		bindings: []*v1alpha1.TenantBinding{tenantBinding(acme, []string{acmeNS}, "strict")},
		want:     got{Protected: true, Note: "namespace acme-ml is labelled guard.xila.us/tenant=globex but listed by the TenantBinding of tenant acme"},
	}, {
		name: "empty label",
		ns:   tenantNS(acmeNS, ""),
		want: got{Protected: true, Note: "namespace acme-ml has an empty guard.xila.us/tenant label"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			byName := func(name string) *v1alpha1.TenantBinding {
				for _, b := range tc.bindings {
					if b.Name == name {
						return b
					}
				}
				return nil
			}
			policies := func(name string) *v1alpha1.PlacementPolicy {
				for _, p := range []*v1alpha1.PlacementPolicy{strict, lenient} {
					if p.Name == name {
						return p
					}
				}
				return nil
			}
			var listing []*v1alpha1.TenantBinding
			for _, b := range tc.bindings {
				for _, ns := range b.Spec.Namespaces {
					if ns == tc.ns.Name {
						listing = append(listing, b)
					}
				}
			}
			id := resolveIdentity(tc.ns, listing, byName, policies)
			g := got{Protected: id.protected, Tenant: id.tenant, Note: id.note}
			if id.policy != nil {
				g.Policy = id.policy.Name
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
}
