package enforcement

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// slicePoolIndex indexes ResourceSlices by their driver's pool.
const slicePoolIndex = "xila-guard.pool"

// slicePoolKeys is the index function of slicePoolIndex.
var slicePoolKeys = devices.SlicePool

// sliceDevice finds the device published under key, in the newest
// generation of its pool.
func (c *caches) sliceDevice(key devices.Key) (*resourcev1.ResourceSlice, *resourcev1.Device) {
	return devices.FindIndexed(c.slices, slicePoolIndex, key)
}

// claimsOf names the ResourceClaims a pod uses.
func claimsOf(pod *corev1.Pod) ([]string, error) { return devices.PodClaims(pod) }

// judgeClaims judges, at Bind, every device the pod's claims hold, with the
// node's fresh evidence and the tenant's fresh policy (devices.Judge, the
// webhook's own judgement of an allocation). The DynamicResources plugin
// wrote the allocations at PreBind, so a claim the cache has not seen
// allocated yet is read from the API server. A device on another node
// than the one judged, and one the node's evidence does not name, refuse
// the bind.
func (pl *Enforcement) judgeClaims(ctx context.Context, pod *corev1.Pod, node *corev1.Node, f *freshFacts) *fwk.Status {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	names, err := claimsOf(pod)
	if err != nil {
		return claimRefusal(guard.ReasonDeviceUnknown, err.Error())
	}
	if f.id.policy == nil {
		return claimRefusal(guard.ReasonNoPolicy, "no PlacementPolicy applies to the tenant, so no device is allowed")
	}
	state := f.stateSpec()
	ev := bindEvaluator{ctx: ctx, pl: pl}
	for _, name := range names {
		claim, err := pl.allocatedClaim(ctx, pod, name)
		if err != nil {
			return fwk.AsStatus(err)
		}
		a := claim.Status.Allocation
		if a == nil {
			return claimRefusal(guard.ReasonDeviceUnknown, fmt.Sprintf("claim %s/%s is not allocated", pod.Namespace, name))
		}
		configs := devices.AllocationConfigs(a)
		for i := range a.Devices.Results {
			r := &a.Devices.Results[i]
			key := devices.KeyOf(r)
			slice, d := pl.caches.sliceDevice(key)
			if d == nil {
				return claimRefusal(guard.ReasonDeviceUnknown, fmt.Sprintf("no ResourceSlice publishes device %s of claim %s", key, name))
			}
			if on := devices.NodeOf(slice, d); on != node.Name {
				return claimRefusal(guard.ReasonDeviceUnknown, fmt.Sprintf("device %s of claim %s is on node %q, not %s", key, name, on, node.Name))
			}
			fs := devices.Judge(ev, pl.settings.profile, pl.settings.poolLabel,
				devices.Claim{Namespace: pod.Namespace, Name: name, Tenant: f.id.tenant, Policy: f.id.policy},
				devices.Allocated{Result: r, Configs: configs, Device: d, Node: node, State: state, Consumers: len(claim.Status.ReservedFor)})
			if len(fs) > 0 {
				rs := make([]guard.Reason, len(fs))
				msgs := make([]string, len(fs))
				for j, fd := range fs {
					rs[j], msgs[j] = fd.Reason, string(fd.Reason)+": "+fd.Detail
				}
				countRefusal(pointBind, rs)
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "Xila Guard refused the bind: "+strings.Join(msgs, "; "))
			}
		}
	}
	return nil
}

// allocatedClaim reads a claim from the cache when the cache already has
// it allocated and reserved for the pod (the DynamicResources plugin writes
// both at PreBind), and otherwise from the API server: an allocation
// written a moment ago, or rewritten since the cache saw it, is judged as
// it is now.
func (pl *Enforcement) allocatedClaim(ctx context.Context, pod *corev1.Pod, name string) (*resourcev1.ResourceClaim, error) {
	c, err := pl.caches.claims.ResourceClaims(pod.Namespace).Get(name)
	if err == nil && c.Status.Allocation != nil && slices.ContainsFunc(c.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
		return r.UID == pod.UID
	}) {
		return c, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading claim %s/%s: %w", pod.Namespace, name, err)
	}
	c, err = pl.handle.ClientSet().ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading claim %s/%s: %w", pod.Namespace, name, err)
	}
	return c, nil
}

func claimRefusal(r guard.Reason, detail string) *fwk.Status {
	countRefusal(pointBind, []guard.Reason{r})
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "Xila Guard refused the bind: "+string(r)+": "+detail)
}

// bindEvaluator is the plugin's evaluator as devices.Judge asks for it:
// an answer that does not add up is no answer, which refuses.
type bindEvaluator struct {
	ctx context.Context
	pl  *Enforcement
}

func (b bindEvaluator) Evaluate(req *wire.EvaluateRequest) *wire.EvaluateResponse {
	resp, err := b.pl.evaluate(b.ctx, pointBind, req)
	if err != nil {
		return &wire.EvaluateResponse{}
	}
	return resp
}
