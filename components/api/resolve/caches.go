package resolve

import "github.com/xila-guard/xila-guard/components/api/v1alpha1"

// Indexer is the part of client-go's cache.Indexer that Caches reads,
// named here so that importing this package does not pull in client-go.
type Indexer interface {
	ByIndex(indexName, indexedValue string) ([]any, error)
	GetByKey(key string) (item any, exists bool, err error)
}

// Caches is a Lookup over informer caches. A cache read never fails: what
// is not cached is missing.
type Caches struct {
	// Bindings holds the TenantBindings, indexed by the namespaces they
	// list under NamespaceIndex.
	Bindings Indexer
	// NamespaceIndex is the name of that index.
	NamespaceIndex string
	// Policies holds the PlacementPolicies.
	Policies Indexer
}

var _ Lookup = Caches{}

// Listing returns the cached TenantBindings that list the namespace.
func (c Caches) Listing(namespace string) ([]*v1alpha1.TenantBinding, error) {
	objs, _ := c.Bindings.ByIndex(c.NamespaceIndex, namespace)
	out := make([]*v1alpha1.TenantBinding, 0, len(objs))
	for _, o := range objs {
		if b, ok := o.(*v1alpha1.TenantBinding); ok {
			out = append(out, b)
		}
	}
	return out, nil
}

// PlacementPolicy returns the named PlacementPolicy from the cache, or nil.
func (c Caches) PlacementPolicy(name string) (*v1alpha1.PlacementPolicy, error) {
	obj, _, _ := c.Policies.GetByKey(name)
	p, _ := obj.(*v1alpha1.PlacementPolicy)
	return p, nil
}
