package enforcement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Index names. The namespace indexes are added to the scheduler's shared
// namespace informer, hence the prefix.
const (
	byNamespace     = "namespace"
	byPool          = "pool"
	byPolicy        = "policy"
	nsByTenant      = "xilaguard-tenant"
	nsByPolicyAnnot = "xilaguard-policy"
)

var everything = labels.Everything()

// caches are the informer caches that PreFilter and Filter read, so the
// scheduling cycle makes no API call.
type caches struct {
	poolLabel  string
	namespaces cache.Indexer
	nodes      corelisters.NodeLister
	pods       corelisters.PodLister
	claims     resourcelisters.ResourceClaimLister
	slices     cache.Indexer
	bindings   cache.Indexer
	policies   cache.Indexer
	states     cache.Indexer
	synced     []cache.InformerSynced
}

// hasSynced reports whether every cache has been filled once.
func (c *caches) hasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// resolve decides the tenant and policy of a namespace's pods.
func (c *caches) resolve(namespace string) (identity, error) {
	obj, ok, err := c.namespaces.GetByKey(namespace)
	if err != nil || !ok {
		// The pod exists, so its namespace does: the cache lags. An error
		// status retries the pod after a backoff.
		return identity{}, fmt.Errorf("namespace %s is not in the scheduler's cache yet", namespace)
	}
	r, err := resolve.Namespace(obj.(*corev1.Namespace), resolve.Caches{Bindings: c.bindings, NamespaceIndex: byNamespace, Policies: c.policies})
	if err != nil {
		return identity{}, err
	}
	return identityOf(r), nil
}

// state returns the NodeSecurityState of the named node, or nil.
func (c *caches) state(node string) *v1alpha1.NodeSecurityState {
	return get[*v1alpha1.NodeSecurityState](c.states, node)
}

// namespacesOfTenant returns the namespaces whose pods belong to, or claim
// to belong to, a tenant: those its binding lists and those labelled.
func (c *caches) namespacesOfTenant(out sets.Set[string], b *v1alpha1.TenantBinding, tenantID string) {
	if b != nil {
		out.Insert(b.Spec.Namespaces...)
	}
	keys, _ := c.namespaces.IndexKeys(nsByTenant, tenantID)
	out.Insert(keys...)
}

// namespacesOfPool returns the namespaces of every tenant whose pods may
// use the pool.
func (c *caches) namespacesOfPool(pool string) sets.Set[string] {
	out := sets.New[string]()
	for _, b := range indexed[*v1alpha1.TenantBinding](c.bindings, byPool, pool) {
		c.namespacesOfTenant(out, b, b.Spec.TenantID)
	}
	// A tenant without a binding has the pool named after it.
	c.namespacesOfTenant(out, nil, pool)
	return out
}

// namespacesOfPolicy returns the namespaces whose pods the policy governs.
func (c *caches) namespacesOfPolicy(name string) sets.Set[string] {
	out := sets.New[string]()
	for _, b := range indexed[*v1alpha1.TenantBinding](c.bindings, byPolicy, name) {
		c.namespacesOfTenant(out, b, b.Spec.TenantID)
	}
	keys, _ := c.namespaces.IndexKeys(nsByPolicyAnnot, name)
	return out.Insert(keys...)
}

func get[T any](idx cache.Indexer, key string) T {
	var zero T
	obj, ok, err := idx.GetByKey(key)
	if err != nil || !ok {
		return zero
	}
	t, _ := obj.(T)
	return t
}

func indexed[T any](idx cache.Indexer, index, value string) []T {
	objs, err := idx.ByIndex(index, value)
	if err != nil {
		return nil
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// bindingIndexers index TenantBindings by listed namespace, pool and policy.
var bindingIndexers = cache.Indexers{
	byNamespace: func(obj any) ([]string, error) {
		if b, ok := obj.(*v1alpha1.TenantBinding); ok {
			return b.Spec.Namespaces, nil
		}
		return nil, nil
	},
	byPool: func(obj any) ([]string, error) {
		if b, ok := obj.(*v1alpha1.TenantBinding); ok {
			return []string{b.Spec.Pool()}, nil
		}
		return nil, nil
	},
	byPolicy: func(obj any) ([]string, error) {
		if b, ok := obj.(*v1alpha1.TenantBinding); ok && b.Spec.EffectivePolicyRef != nil {
			return []string{b.Spec.EffectivePolicyRef.Name}, nil
		}
		return nil, nil
	},
}

// namespaceIndexers index namespaces by tenant label and policy annotation.
var namespaceIndexers = cache.Indexers{
	nsByTenant: func(obj any) ([]string, error) {
		if ns, ok := obj.(*corev1.Namespace); ok {
			if t, ok := ns.Labels[guard.LabelTenant]; ok {
				return []string{t}, nil
			}
		}
		return nil, nil
	},
	nsByPolicyAnnot: func(obj any) ([]string, error) {
		if ns, ok := obj.(*corev1.Namespace); ok {
			if p, ok := ns.Annotations[guard.AnnotationPolicy]; ok {
				return []string{p}, nil
			}
		}
		return nil, nil
	},
}
