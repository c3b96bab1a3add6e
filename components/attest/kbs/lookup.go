package kbs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// lookup is a resolve.Lookup over the broker's cache.
type lookup struct {
	ctx context.Context
	r   client.Reader
}

var _ resolve.Lookup = lookup{}

func (l lookup) Listing(namespace string) ([]*v1alpha1.TenantBinding, error) {
	var list v1alpha1.TenantBindingList
	if err := l.r.List(l.ctx, &list, client.MatchingFields{IndexBindingNamespace: namespace}); err != nil {
		return nil, fmt.Errorf("listing the TenantBindings of namespace %s: %w", namespace, err)
	}
	out := make([]*v1alpha1.TenantBinding, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (l lookup) PlacementPolicy(name string) (*v1alpha1.PlacementPolicy, error) {
	return resolve.GetPlacementPolicy(l.ctx, l.r, name)
}

// IndexBindingNamespaces is the indexer function of IndexBindingNamespace.
func IndexBindingNamespaces(obj client.Object) []string {
	b, ok := obj.(*v1alpha1.TenantBinding)
	if !ok {
		return nil
	}
	return b.Spec.Namespaces
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
