package cluster

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/webhook/pkg/admission"
)

// Index names: ResourceSlices by their driver's pool, ResourceClaims by
// the devices their allocation holds.
const (
	byPool     = "pool"
	byDevice   = "device"
	byConsumer = "consumer"
)

// Devices reads ResourceSlices and allocated ResourceClaims from informer
// caches. It implements admission.Devices.
type Devices struct {
	factory informers.SharedInformerFactory
	slices  cache.Indexer
	claims  cache.Indexer
	synced  []cache.InformerSynced
}

var _ admission.Devices = (*Devices)(nil)

// NewDevices builds the informers; Start runs them.
func NewDevices(kube kubernetes.Interface) (*Devices, error) {
	f := informers.NewSharedInformerFactory(kube, 0)
	slices := f.Resource().V1().ResourceSlices().Informer()
	claims := f.Resource().V1().ResourceClaims().Informer()
	if err := slices.AddIndexers(cache.Indexers{byPool: devices.SlicePool}); err != nil {
		return nil, fmt.Errorf("indexing ResourceSlices by pool: %w", err)
	}
	if err := claims.SetTransform(slimClaim); err != nil {
		return nil, fmt.Errorf("slimming cached ResourceClaims: %w", err)
	}
	if err := claims.AddIndexers(cache.Indexers{byDevice: heldDevices, byConsumer: consumerPods}); err != nil {
		return nil, fmt.Errorf("indexing ResourceClaims by device: %w", err)
	}
	return &Devices{
		factory: f,
		slices:  slices.GetIndexer(),
		claims:  claims.GetIndexer(),
		synced:  []cache.InformerSynced{slices.HasSynced, claims.HasSynced},
	}, nil
}

// Start runs the informers until ctx is done.
func (d *Devices) Start(ctx context.Context) { d.factory.Start(ctx.Done()) }

// WaitForSync blocks until the caches have synced or ctx is done.
func (d *Devices) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), d.synced...)
}

// Synced reports whether both caches have been filled once.
func (d *Devices) Synced() bool {
	for _, s := range d.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Device returns the device published under key, in the newest
// generation of its pool.
func (d *Devices) Device(key devices.Key) (*resourcev1.ResourceSlice, *resourcev1.Device, bool) {
	slice, dev := devices.FindIndexed(d.slices, byPool, key)
	return slice, dev, dev != nil
}

// Holders lists the claims whose allocation holds the device.
func (d *Devices) Holders(key devices.Key) []admission.ClaimRef {
	objs, err := d.claims.ByIndex(byDevice, key.String())
	if err != nil {
		return nil
	}
	out := make([]admission.ClaimRef, 0, len(objs))
	for _, o := range objs {
		c := o.(*resourcev1.ResourceClaim)
		out = append(out, admission.ClaimRef{Namespace: c.Namespace, Name: c.Name, UID: c.UID})
	}
	return out
}

// ReservedFor lists the allocated claims of a namespace reserved for the
// named pod.
func (d *Devices) ReservedFor(namespace, pod string) []*resourcev1.ResourceClaim {
	objs, err := d.claims.ByIndex(byConsumer, namespace+"/"+pod)
	if err != nil {
		return nil
	}
	out := make([]*resourcev1.ResourceClaim, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*resourcev1.ResourceClaim))
	}
	return out
}

func consumerPods(obj any) ([]string, error) {
	c := obj.(*resourcev1.ResourceClaim)
	var out []string
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, c.Namespace+"/"+r.Name)
		}
	}
	return out, nil
}

func heldDevices(obj any) ([]string, error) {
	c := obj.(*resourcev1.ResourceClaim)
	a := c.Status.Allocation
	if a == nil {
		return nil, nil
	}
	out := make([]string, 0, len(a.Devices.Results))
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		out = append(out, devices.KeyOf(r).String())
	}
	return out, nil
}

// slimClaim keeps only what Holders and ReservedFor read: who the claim
// is, the devices its allocation holds and its consumers.
func slimClaim(obj any) (any, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return obj, nil
	}
	out := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Name: c.Name, Namespace: c.Namespace, UID: c.UID, ResourceVersion: c.ResourceVersion,
	}}
	if a := c.Status.Allocation; a != nil {
		results := make([]resourcev1.DeviceRequestAllocationResult, len(a.Devices.Results))
		for i, r := range a.Devices.Results {
			results[i] = resourcev1.DeviceRequestAllocationResult{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device, AdminAccess: r.AdminAccess}
		}
		out.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
	}
	out.Status.ReservedFor = c.Status.ReservedFor
	return out, nil
}
