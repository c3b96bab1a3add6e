package postbind

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// indexBindingNamespace indexes TenantBindings by the namespaces they list.
const indexBindingNamespace = "spec.namespaces"

// identity is a pod's tenant and policy, as the evaluator takes them.
type identity struct {
	protected bool
	tenant    *wire.Tenant
	policy    *wire.Policy
}

// resolveIdentity decides a namespace's tenant and policy with the rules every
// component shares (package resolve), reading through the manager's
// cache. What a missing tenant or policy means is the evaluator's to
// decide.
func resolveIdentity(ctx context.Context, r client.Reader, ns *corev1.Namespace) (identity, error) {
	id, err := resolve.Namespace(ns, reader{ctx, r})
	if err != nil {
		return identity{}, err
	}
	return identity{protected: id.Protected, tenant: wire.TenantOf(id.Tenant), policy: wire.PolicyOf(id.Policy)}, nil
}

// reader is a resolve.Lookup over a controller-runtime reader.
type reader struct {
	ctx context.Context
	r   client.Reader
}

var _ resolve.Lookup = reader{}

func (l reader) Listing(namespace string) ([]*v1alpha1.TenantBinding, error) {
	var list v1alpha1.TenantBindingList
	if err := l.r.List(l.ctx, &list, client.MatchingFields{indexBindingNamespace: namespace}); err != nil {
		return nil, fmt.Errorf("listing the TenantBindings of namespace %s: %w", namespace, err)
	}
	out := make([]*v1alpha1.TenantBinding, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (l reader) PlacementPolicy(name string) (*v1alpha1.PlacementPolicy, error) {
	return get(l, "PlacementPolicy", name, &v1alpha1.PlacementPolicy{})
}

// get reads the named cluster-scoped object of the kind into obj; a
// missing one is nil.
func get[T client.Object](l reader, kind, name string, obj T) (T, error) {
	var zero T
	if err := l.r.Get(l.ctx, client.ObjectKey{Name: name}, obj); apierrors.IsNotFound(err) {
		return zero, nil
	} else if err != nil {
		return zero, fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	return obj, nil
}
