package resolve

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/cache"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestCaches(t *testing.T) {
	const index = "namespace"
	bindings := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{index: func(obj any) ([]string, error) {
		return obj.(*v1alpha1.TenantBinding).Spec.Namespaces, nil
	}})
	policies := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, b := range []*v1alpha1.TenantBinding{binding("acme", "", "strict", "acme-ml", "shared"), binding("globex", "", "", "shared")} {
		if err := bindings.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := policies.Add(policy("strict")); err != nil {
		t.Fatal(err)
	}
	c := Caches{Bindings: bindings, NamespaceIndex: index, Policies: policies}

	names := func(bs []*v1alpha1.TenantBinding) []string {
		out := []string{}
		for _, b := range bs {
			out = append(out, b.Name)
		}
		slices.Sort(out)
		return out
	}
	for ns, want := range map[string][]string{"acme-ml": {"acme"}, "shared": {"acme", "globex"}, "default": {}} {
		got, err := c.Listing(ns)
		if err != nil {
			t.Fatalf("Listing(%s): %v", ns, err)
		}
		if diff := cmp.Diff(want, names(got)); diff != "" {
			t.Errorf("Listing(%s) (-want +got):\n%s", ns, diff)
		}
	}
	if p, err := c.PlacementPolicy("strict"); err != nil || p == nil || p.Name != "strict" {
		t.Errorf("PlacementPolicy(strict) = %v, %v; want strict", p, err)
	}
	if p, err := c.PlacementPolicy("gone"); err != nil || p != nil {
		t.Errorf("PlacementPolicy(gone) = %v, %v; want nil, nil", p, err)
	}
}
