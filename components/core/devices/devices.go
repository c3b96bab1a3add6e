package devices

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Key names a device the way an allocation result does.
type Key struct {
	Driver, Pool, Device string
}

// KeyOf is the key of an allocation result's device.
func KeyOf(r *resourcev1.DeviceRequestAllocationResult) Key {
	return Key{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
}

func (k Key) String() string { return k.Driver + "/" + k.Pool + "/" + k.Device }

// Facts are what a ResourceSlice states about a device, as the GPU
// drivers name them: the NVIDIA driver's uuid, productName, type
// (gpu, mig, vfio), profile and parentUUID, and the example driver's uuid
// and model. Empty when the slice does not say.
type Facts struct {
	Type       string
	UUID       string
	Model      string
	MIGProfile string
	ParentUUID string
}

// FactsOf reads a slice device's attributes. A driver may qualify an
// attribute with its own domain (gpu.nvidia.com/uuid) or leave it bare.
func FactsOf(driver string, d *resourcev1.Device) Facts {
	attr := func(names ...string) string {
		for _, n := range names {
			for _, q := range []resourcev1.QualifiedName{resourcev1.QualifiedName(n), resourcev1.QualifiedName(driver + "/" + n)} {
				if a, ok := d.Attributes[q]; ok {
					switch {
					case a.StringValue != nil:
						return *a.StringValue
					case a.VersionValue != nil:
						return *a.VersionValue
					}
				}
			}
		}
		return ""
	}
	return Facts{
		Type:       attr("type"),
		UUID:       attr("uuid"),
		Model:      attr("productName", "model"),
		MIGProfile: attr("profile"),
		ParentUUID: attr("parentUUID"),
	}
}

// Evidence finds the evidence device that names key, and checks what the
// slice states against it. It returns the device, or the reason it cannot
// be judged (DEVICE_EVIDENCE_MISSING, DEVICE_EVIDENCE_MISMATCH) with a
// message.
func Evidence(state *v1alpha1.NodeSecurityStateSpec, key Key, f Facts) (*v1alpha1.GPUDevice, guard.Reason, string) {
	if state == nil {
		return nil, guard.ReasonDeviceEvidenceMissing, fmt.Sprintf("device %s is on a node with no evidence", key)
	}
	var dev *v1alpha1.GPUDevice
	for i := range state.Devices {
		d := &state.Devices[i]
		if d.DRA == nil || d.DRA.Driver != key.Driver || d.DRA.Pool != key.Pool || d.DRA.Device != key.Device {
			continue
		}
		if dev != nil {
			return nil, guard.ReasonDeviceEvidenceMismatch, fmt.Sprintf("the node's evidence names device %s twice (%s and %s)", key, dev.ID, d.ID)
		}
		dev = d
	}
	if dev == nil {
		return nil, guard.ReasonDeviceEvidenceMissing, fmt.Sprintf("the node's evidence names no device %s", key)
	}
	var diffs []string
	differ := func(what, slice, evidence string, same func(a, b string) bool) {
		if slice != "" && !same(slice, evidence) {
			diffs = append(diffs, fmt.Sprintf("%s %q, evidence %q", what, slice, evidence))
		}
	}
	exact := func(a, b string) bool { return a == b }
	differ("uuid", f.UUID, dev.ID, exact)
	differ("model", f.Model, dev.Model, sameModel)
	differ("MIG profile", f.MIGProfile, dev.MIGProfile, exact)
	differ("MIG parent", f.ParentUUID, dev.ParentID, exact)
	if f.Type == "mig" && !isMIG(dev) {
		diffs = append(diffs, "type mig, evidence of a whole GPU")
	}
	if f.Type == "gpu" && isMIG(dev) {
		diffs = append(diffs, "type gpu, evidence of a MIG slice")
	}
	if len(diffs) > 0 {
		return nil, guard.ReasonDeviceEvidenceMismatch, fmt.Sprintf("the ResourceSlice's device %s disagrees with the evidence: %s",
			key, strings.Join(diffs, "; "))
	}
	return dev, "", ""
}

func isMIG(d *v1alpha1.GPUDevice) bool { return d.MIG || d.SharingMode == v1alpha1.SharingMIG }

// sameModel compares model names the way drivers and publishers spell
// them: NVIDIA H100 80GB HBM3, NVIDIA-H100-80GB-HBM3.
func sameModel(a, b string) bool {
	norm := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == ' ' || r == '_' {
				return '-'
			}
			return r
		}, strings.ToLower(strings.TrimSpace(s)))
	}
	return norm(a) == norm(b)
}

// Narrow returns the node's evidence with dev as its only device, shared
// as the claim asks (mode TimeSlicing or MPS; empty keeps the device's
// own mode). The evaluator then judges the device a claim is given: the
// node's other devices, in other modes, do not make it MIXED_POOL, and the
// device's mode is the one the driver will set up.
func Narrow(state *v1alpha1.NodeSecurityStateSpec, dev *v1alpha1.GPUDevice, mode v1alpha1.GPUSharingMode) *v1alpha1.NodeSecurityStateSpec {
	out := *state
	d := *dev
	if mode == v1alpha1.SharingTimeSlicing || mode == v1alpha1.SharingMPS {
		d.SharingMode = mode
		if dev.SharingMode == v1alpha1.SharingMIG {
			d.MIG = true
		}
	}
	out.Devices = []v1alpha1.GPUDevice{d}
	return &out
}

// Shared reports whether a device is shared: given out as a share of its
// capacity, it serves several claims at once; time-sliced or shared by
// MPS, it serves the processes of every consumer of its claim at once.
func Shared(mode v1alpha1.GPUSharingMode, capacityShare bool) bool {
	return capacityShare || mode == v1alpha1.SharingTimeSlicing || mode == v1alpha1.SharingMPS
}

// NodeOf is the node a slice device is on: its own nodeName, else its
// slice's. Empty for devices reached from several nodes.
func NodeOf(slice *resourcev1.ResourceSlice, d *resourcev1.Device) string {
	if d.NodeName != nil && *d.NodeName != "" {
		return *d.NodeName
	}
	if slice.Spec.NodeName != nil {
		return *slice.Spec.NodeName
	}
	return ""
}

// Nodes are the nodes whose devices a slice publishes, each once.
func Nodes(slice *resourcev1.ResourceSlice) []string {
	var out []string
	for i := range slice.Spec.Devices {
		if n := NodeOf(slice, &slice.Spec.Devices[i]); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// PodClaims names the ResourceClaims a pod uses: those it names, and
// those the resource claim controller made from its templates (recorded in
// the pod's status; an entry there without a claim name means that none
// was needed). A template the controller has not handled yet is an error.
func PodClaims(pod *corev1.Pod) ([]string, error) {
	out := make([]string, 0, len(pod.Spec.ResourceClaims))
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil {
			out = append(out, *pc.ResourceClaimName)
			continue
		}
		found := false
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.Name != pc.Name {
				continue
			}
			found = true
			if s.ResourceClaimName != nil {
				out = append(out, *s.ResourceClaimName)
			}
		}
		if !found {
			return nil, fmt.Errorf("the claim of the pod's template %q has not been created", pc.Name)
		}
	}
	return out, nil
}

// PoolKey names a driver's pool: the index under which callers keep the
// slices Find is given.
func PoolKey(driver, pool string) string { return driver + "/" + pool }

// SlicePool is an index function of ResourceSlices by their pool
// (PoolKey), for FindIndexed.
func SlicePool(obj any) ([]string, error) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return nil, nil
	}
	return []string{PoolKey(s.Spec.Driver, s.Spec.Pool.Name)}, nil
}

// FindIndexed is Find among the slices an indexer holds under index, a
// SlicePool index.
func FindIndexed(idx cache.Indexer, index string, key Key) (*resourcev1.ResourceSlice, *resourcev1.Device) {
	objs, err := idx.ByIndex(index, PoolKey(key.Driver, key.Pool))
	if err != nil {
		return nil, nil
	}
	pool := make([]*resourcev1.ResourceSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*resourcev1.ResourceSlice); ok {
			pool = append(pool, s)
		}
	}
	return Find(pool, key)
}

// Find returns the device published under key, with its slice, among the
// slices of its pool (PoolKey). A pool being rewritten has slices of two
// generations for a while; only the newest counts, so a device an older
// generation published and the newest dropped is not found.
func Find(pool []*resourcev1.ResourceSlice, key Key) (*resourcev1.ResourceSlice, *resourcev1.Device) {
	var newest int64
	for _, s := range pool {
		if s.Spec.Driver == key.Driver && s.Spec.Pool.Name == key.Pool && s.Spec.Pool.Generation > newest {
			newest = s.Spec.Pool.Generation
		}
	}
	for _, s := range pool {
		if s.Spec.Driver != key.Driver || s.Spec.Pool.Name != key.Pool || s.Spec.Pool.Generation != newest {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == key.Device {
				return s, &s.Spec.Devices[i]
			}
		}
	}
	return nil, nil
}

// ByClaim reports whether a pod takes GPUs only through DRA claims: it
// names ResourceClaims or claim templates, and no container of it requests
// or limits a GPU resource (guard.IsGPUResource). The devices its claims
// are given are judged one by one where they are allocated, so the node's
// own judgement of it leaves out the devices the evidence names for DRA
// (wire.EvaluateRequest.DevicesByClaim).
func ByClaim(pod *corev1.Pod) bool {
	if len(pod.Spec.ResourceClaims) == 0 {
		return false
	}
	gpu := func(l corev1.ResourceList) bool {
		for name := range l {
			if guard.IsGPUResource(string(name)) {
				return true
			}
		}
		return false
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if gpu(cs[i].Resources.Requests) || gpu(cs[i].Resources.Limits) {
				return false
			}
		}
	}
	return pod.Spec.Resources == nil || !gpu(pod.Spec.Resources.Requests) && !gpu(pod.Spec.Resources.Limits)
}
