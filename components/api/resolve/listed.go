package resolve

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Listed is a Lookup over TenantBindings listed once and a reader's
// PlacementPolicies: one consistent view of every binding, for callers
// that resolve many namespaces at a time (controllers, the kubectl
// plugin).
type Listed struct {
	ctx context.Context
	r   client.Reader
	// Bindings are the TenantBindings, as listed.
	Bindings []v1alpha1.TenantBinding
}

var _ Lookup = &Listed{}

// ListBindings lists the TenantBindings through r.
func ListBindings(ctx context.Context, r client.Reader) (*Listed, error) {
	var list v1alpha1.TenantBindingList
	if err := r.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing TenantBindings: %w", err)
	}
	return &Listed{ctx: ctx, r: r, Bindings: list.Items}, nil
}

// Listing implements Lookup.
func (l *Listed) Listing(namespace string) ([]*v1alpha1.TenantBinding, error) {
	var out []*v1alpha1.TenantBinding
	for i := range l.Bindings {
		if slices.Contains(l.Bindings[i].Spec.Namespaces, namespace) {
			out = append(out, &l.Bindings[i])
		}
	}
	return out, nil
}

// PlacementPolicy implements Lookup.
func (l *Listed) PlacementPolicy(name string) (*v1alpha1.PlacementPolicy, error) {
	return GetPlacementPolicy(l.ctx, l.r, name)
}

// GetPlacementPolicy reads the named PlacementPolicy through r, as
// Lookup.PlacementPolicy wants it: nil and no error when there is none.
func GetPlacementPolicy(ctx context.Context, r client.Reader, name string) (*v1alpha1.PlacementPolicy, error) {
	p := &v1alpha1.PlacementPolicy{}
	if err := r.Get(ctx, client.ObjectKey{Name: name}, p); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading PlacementPolicy %s: %w", name, err)
	}
	return p, nil
}

// Namespace reads the named namespace. One that does not exist yet is
// returned bare, as its pods will resolve once it does (by the bindings,
// with no labels or annotations), with exists false.
func (l *Listed) Namespace(name string) (ns *corev1.Namespace, exists bool, err error) {
	ns = &corev1.Namespace{}
	if err := l.r.Get(l.ctx, client.ObjectKey{Name: name}, ns); apierrors.IsNotFound(err) {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns, true, nil
}
