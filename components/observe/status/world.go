package status

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// world is one reconcile's view of the TenantBindings, listed once, and
// the cached PlacementPolicies and Namespaces.
type world struct {
	*resolve.Listed
}

// newWorld lists the bindings.
func newWorld(ctx context.Context, c client.Reader) (world, error) {
	l, err := resolve.ListBindings(ctx, c)
	return world{l}, err
}

// namespaces resolves every namespace of the binding, in its order. A
// namespace that does not exist yet resolves as its pods will once it
// does.
func (w world) namespaces(b *v1alpha1.TenantBinding) ([]namespaceState, error) {
	out := make([]namespaceState, 0, len(b.Spec.Namespaces))
	for _, name := range b.Spec.Namespaces {
		ns, exists, err := w.Namespace(name)
		if err != nil {
			return nil, err
		}
		id, err := resolve.Namespace(ns, w)
		if err != nil {
			return nil, err
		}
		out = append(out, namespaceState{name: name, exists: exists, id: id})
	}
	return out, nil
}

// owners returns the bindings whose pool is pool.
func (w world) owners(pool string) []*v1alpha1.TenantBinding {
	var out []*v1alpha1.TenantBinding
	for i := range w.Bindings {
		if pool != "" && w.Bindings[i].Spec.Pool() == pool {
			out = append(out, &w.Bindings[i])
		}
	}
	return out
}

// policyNames returns the distinct policies the namespaces resolve to, in
// their order.
func policyNames(nss []namespaceState) []string {
	var out []string
	for _, ns := range nss {
		if p := ns.id.Policy; p != nil && !slices.Contains(out, p.Name) {
			out = append(out, p.Name)
		}
	}
	return out
}
