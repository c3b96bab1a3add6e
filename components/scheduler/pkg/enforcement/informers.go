package enforcement

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guardclient"
)

// startCaches builds the plugin's caches: the scheduler's shared informers
// for namespaces, nodes and pods, and informers of its own for the guard
// kinds. Until every cache has synced, PreFilter refuses each pod with an
// error, which retries it after a backoff: without the TenantBindings it
// cannot tell which pods are protected.
func startCaches(ctx context.Context, h fwk.Handle, gc *guardclient.Client, poolLabel string) (*caches, []guardInformer, error) {
	factory := h.SharedInformerFactory()
	nsInformer := factory.Core().V1().Namespaces().Informer()
	if err := nsInformer.AddIndexers(namespaceIndexers); err != nil {
		return nil, nil, fmt.Errorf("indexing namespaces: %w", err)
	}
	// The scheduler's pod informer carries no namespace index, and waking a
	// tenant's pending pods lists them by namespace.
	podInformer := factory.Core().V1().Pods().Informer()
	if _, ok := podInformer.GetIndexer().GetIndexers()[cache.NamespaceIndex]; !ok {
		if err := podInformer.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}); err != nil {
			return nil, nil, fmt.Errorf("indexing pods by namespace: %w", err)
		}
	}
	// The devices of a pod's claims, judged again at Bind: the
	// scheduler's own informers of claims and slices, which its
	// DynamicResources plugin reads too.
	sliceInformer := factory.Resource().V1().ResourceSlices().Informer()
	if err := sliceInformer.AddIndexers(cache.Indexers{slicePoolIndex: slicePoolKeys}); err != nil {
		return nil, nil, fmt.Errorf("indexing ResourceSlices by pool: %w", err)
	}
	c := &caches{
		poolLabel:  poolLabel,
		namespaces: nsInformer.GetIndexer(),
		nodes:      factory.Core().V1().Nodes().Lister(),
		pods:       factory.Core().V1().Pods().Lister(),
		claims:     factory.Resource().V1().ResourceClaims().Lister(),
		slices:     sliceInformer.GetIndexer(),
		synced:     []cache.InformerSynced{nsInformer.HasSynced},
	}
	var infs []guardInformer
	for _, r := range []struct {
		resource string
		indexers cache.Indexers
		into     *cache.Indexer
	}{
		{guardclient.TenantBindings, bindingIndexers, &c.bindings},
		{guardclient.PlacementPolicies, nil, &c.policies},
		{guardclient.NodeSecurityStates, nil, &c.states},
	} {
		lw, obj, err := gc.ListWatch(r.resource)
		if err != nil {
			return nil, nil, err
		}
		inf := cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{
			Indexers: r.indexers, ObjectDescription: r.resource,
		})
		*r.into = inf.GetIndexer()
		c.synced = append(c.synced, inf.HasSynced)
		infs = append(infs, guardInformer{r.resource, inf})
	}
	return c, infs, nil
}

// guardInformer is an informer of one of the guard kinds.
type guardInformer struct {
	resource string
	informer cache.SharedIndexInformer
}

// watch registers the activator's handlers and starts the informers.
func watch(ctx context.Context, h fwk.Handle, infs []guardInformer, a *activator) error {
	handlers := map[string]cache.ResourceEventHandler{
		guardclient.TenantBindings:     a.bindingHandler(),
		guardclient.PlacementPolicies:  a.policyHandler(),
		guardclient.NodeSecurityStates: a.stateHandler(),
	}
	if _, err := h.SharedInformerFactory().Core().V1().Namespaces().Informer().AddEventHandler(a.namespaceHandler()); err != nil {
		return fmt.Errorf("watching namespaces: %w", err)
	}
	for _, gi := range infs {
		if _, err := gi.informer.AddEventHandler(handlers[gi.resource]); err != nil {
			return fmt.Errorf("watching %s: %w", gi.resource, err)
		}
		go gi.informer.RunWithContext(ctx)
	}
	return nil
}

// initialSyncWait bounds how long New waits for the guard kinds' caches.
// The scheduler starts its own informers, and waits for them, only after
// every plugin is built; a pod it schedules before the guard caches are
// filled is refused and retried after a backoff, so waiting here keeps a
// restarted scheduler from sending its first pods back to the queue.
// Past the bound New returns anyway and PreFilter keeps refusing until the
// caches sync: the scheduler still starts, serves its health and metrics
// endpoints and says why its pods wait.
const initialSyncWait = time.Minute

// waitForSync waits until the guard informers have synced, ctx ends or
// initialSyncWait passes, and says whether they synced.
func waitForSync(ctx context.Context, infs []guardInformer) bool {
	ctx, cancel := context.WithTimeout(ctx, initialSyncWait)
	defer cancel()
	synced := make([]cache.InformerSynced, len(infs))
	for i, gi := range infs {
		synced[i] = gi.informer.HasSynced
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}
