package enforcement

import (
	"context"
	"fmt"
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

// sliceDeviceIndex indexes ResourceSlices by the devices they publish.
const sliceDeviceIndex = "xila-guard.device"

func sliceDeviceKeys(obj any) ([]string, error) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return nil, nil
	}
	out := make([]string, 0, len(s.Spec.Devices))
	for _, d := range s.Spec.Devices {
		out = append(out, devices.Key{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}.String())
	}
	return out, nil
}

// sliceDevice finds the device published under key; the newest generation
// of its pool wins.
func (c *caches) sliceDevice(key devices.Key) (*resourcev1.ResourceSlice, *resourcev1.Device) {
	objs, err := c.slices.ByIndex(sliceDeviceIndex, key.String())
	if err != nil {
		return nil, nil
	}
	var slice *resourcev1.ResourceSlice
	var dev *resourcev1.Device
	for _, o := range objs {
		s := o.(*resourcev1.ResourceSlice)
		if slice != nil && s.Spec.Pool.Generation <= slice.Spec.Pool.Generation {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == key.Device {
				slice, dev = s, &s.Spec.Devices[i]
				break
			}
		}
	}
	return slice, dev
}

// claimsOf names the ResourceClaims a pod uses: those it names, and those
// the resource claim controller made from its templates.
func claimsOf(pod *corev1.Pod) ([]string, error) {
	out := make([]string, 0, len(pod.Spec.ResourceClaims))
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil {
			out = append(out, *pc.ResourceClaimName)
			continue
		}
		found := false
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.Name == pc.Name && s.ResourceClaimName != nil {
				out = append(out, *s.ResourceClaimName)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("the claim of the pod's template %q has not been created", pc.Name)
		}
	}
	return out, nil
}

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
		claim, err := pl.allocatedClaim(ctx, pod.Namespace, name)
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
				devices.Allocated{Result: r, Configs: configs, Device: d, Node: node, State: state})
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

// allocatedClaim reads a claim from the cache, or from the API server when
// the cache has it unallocated (the allocation was written a moment ago).
func (pl *Enforcement) allocatedClaim(ctx context.Context, ns, name string) (*resourcev1.ResourceClaim, error) {
	c, err := pl.caches.claims.ResourceClaims(ns).Get(name)
	if err == nil && c.Status.Allocation != nil {
		return c, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading claim %s/%s: %w", ns, name, err)
	}
	c, err = pl.handle.ClientSet().ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading claim %s/%s: %w", ns, name, err)
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
