package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/guardclient"
	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
	"github.com/xila-guard/xila-guard/components/webhook/pkg/admission"
)

// Index names.
const (
	byNamespace = "namespace"
	byNode      = "nodeName"
)

// namespaceReadTimeout bounds the live read of a namespace the cache has
// not seen yet.
const namespaceReadTimeout = 2 * time.Second

// Cluster reads the cluster from informer caches. It implements
// admission.Cluster.
type Cluster struct {
	kube       kubernetes.Interface
	factories  []informers.SharedInformerFactory
	guard      []cache.SharedIndexInformer
	namespaces cache.Indexer
	nodes      cache.Indexer
	pods       cache.Indexer
	bindings   cache.Indexer
	policies   cache.Indexer
	states     cache.Indexer
	synced     []cache.InformerSynced
	// policiesSynced is apart from synced: without PlacementPolicies only
	// protected pods cannot be judged, so the webhook stays ready for the
	// others and refuses those.
	policiesSynced cache.InformerSynced
}

var _ admission.Cluster = (*Cluster)(nil)

// New builds the informers; Start runs them.
func New(cfg *rest.Config, kube kubernetes.Interface) (*Cluster, error) {
	c := &Cluster{kube: kube}
	all := informers.NewSharedInformerFactory(kube, 0)
	// Only pods bound to a node and not terminated matter: the tenant pods
	// that lock a node's pool membership.
	bound := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.AndSelectors(
			fields.OneTermNotEqualSelector("spec.nodeName", ""),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
		).String()
	}))
	c.factories = []informers.SharedInformerFactory{all, bound}

	ns := all.Core().V1().Namespaces().Informer()
	nodes := all.Core().V1().Nodes().Informer()
	pods := bound.Core().V1().Pods().Informer()
	if err := pods.SetTransform(slimPod); err != nil {
		return nil, fmt.Errorf("slimming cached pods: %w", err)
	}
	if err := pods.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
	}}); err != nil {
		return nil, fmt.Errorf("indexing pods by node: %w", err)
	}
	c.namespaces, c.nodes, c.pods = ns.GetIndexer(), nodes.GetIndexer(), pods.GetIndexer()
	c.synced = []cache.InformerSynced{ns.HasSynced, nodes.HasSynced, pods.HasSynced}

	gc, err := guardclient.New(cfg)
	if err != nil {
		return nil, err
	}
	bindingsLW, binding, err := gc.ListWatch(guardclient.TenantBindings)
	if err != nil {
		return nil, err
	}
	policiesLW, policy, err := gc.ListWatch(guardclient.PlacementPolicies)
	if err != nil {
		return nil, err
	}
	bindings := cache.NewSharedIndexInformerWithOptions(bindingsLW, binding, cache.SharedIndexInformerOptions{
		ObjectDescription: guardclient.TenantBindings,
		Indexers: cache.Indexers{byNamespace: func(obj any) ([]string, error) {
			return obj.(*v1alpha1.TenantBinding).Spec.Namespaces, nil
		}},
	})
	policies := cache.NewSharedIndexInformerWithOptions(policiesLW, policy, cache.SharedIndexInformerOptions{
		ObjectDescription: guardclient.PlacementPolicies,
	})
	statesLW, state, err := gc.ListWatch(guardclient.NodeSecurityStates)
	if err != nil {
		return nil, err
	}
	states := cache.NewSharedIndexInformerWithOptions(statesLW, state, cache.SharedIndexInformerOptions{
		ObjectDescription: guardclient.NodeSecurityStates,
	})
	c.bindings, c.policies, c.states = bindings.GetIndexer(), policies.GetIndexer(), states.GetIndexer()
	c.guard = []cache.SharedIndexInformer{bindings, policies, states}
	c.synced = append(c.synced, bindings.HasSynced, states.HasSynced)
	c.policiesSynced = policies.HasSynced
	return c, nil
}

// Start runs every informer until ctx is done.
func (c *Cluster) Start(ctx context.Context) {
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	for _, inf := range c.guard {
		go inf.RunWithContext(ctx)
	}
}

// WaitForSync blocks until every cache has synced or ctx is done, and
// reports which.
func (c *Cluster) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), append(c.synced, c.policiesSynced)...)
}

// Synced reports whether every cache but the PlacementPolicies' has been
// filled once: enough to judge every request but a protected pod's.
func (c *Cluster) Synced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Identity resolves a namespace's tenant and policy. A namespace the
// cache has not seen yet, because it was created a moment ago, is read
// from the API server. A protected namespace's identity is an error until
// the PlacementPolicies have synced.
func (c *Cluster) Identity(ctx context.Context, namespace string) (admission.Identity, error) {
	id, err := c.identity(ctx, namespace)
	if err == nil && id.Protected && !c.policiesSynced() {
		return admission.Identity{}, fmt.Errorf("the PlacementPolicies have not synced yet; the webhook needs get, list and watch on placementpolicies.%s", v1alpha1.GroupVersion.Group)
	}
	return id, err
}

func (c *Cluster) identity(ctx context.Context, namespace string) (admission.Identity, error) {
	ns, err := c.namespace(ctx, namespace)
	if err != nil {
		return admission.Identity{}, err
	}
	r, err := resolve.Namespace(ns, resolve.Caches{Bindings: c.bindings, NamespaceIndex: byNamespace, Policies: c.policies})
	if err != nil {
		return admission.Identity{}, err
	}
	_, labelled := ns.Labels[guard.LabelTenant]
	return admission.Identity{Protected: r.Protected, Tenant: wire.TenantOf(r.Tenant), Policy: wire.PolicyOf(r.Policy), Note: r.Note, Labelled: labelled}, nil
}

func (c *Cluster) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if obj, ok, err := c.namespaces.GetByKey(name); err == nil && ok {
		return obj.(*corev1.Namespace), nil
	}
	ctx, cancel := context.WithTimeout(ctx, namespaceReadTimeout)
	defer cancel()
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns, nil
}

// Node returns the named node from the cache.
func (c *Cluster) Node(name string) (*corev1.Node, bool) {
	obj, ok, err := c.nodes.GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*corev1.Node), true
}

// State returns the cached evidence of the named node.
func (c *Cluster) State(name string) (*v1alpha1.NodeSecurityStateSpec, bool) {
	obj, ok, err := c.states.GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	nss, ok := obj.(*v1alpha1.NodeSecurityState)
	if !ok {
		return nil, false
	}
	return &nss.Spec, true
}

// Pod reads a pod from the API server: it is being bound, so the cache of
// bound pods does not have it.
func (c *Cluster) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, namespaceReadTimeout)
	defer cancel()
	p, err := c.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
	}
	return p, nil
}

// TenantPodsOn lists the pods of protected namespaces bound to the node
// that have not terminated, sorted.
func (c *Cluster) TenantPodsOn(ctx context.Context, node string) ([]string, error) {
	objs, err := c.pods.ByIndex(byNode, node)
	if err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	var out []string
	protected := map[string]bool{}
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		prot, seen := protected[p.Namespace]
		if !seen {
			id, err := c.identity(ctx, p.Namespace)
			if err != nil {
				return nil, err
			}
			prot = id.Protected
			protected[p.Namespace] = prot
		}
		if prot {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// slimPod keeps only what TenantPodsOn reads, so that caching every bound
// pod of a large cluster stays cheap.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}
