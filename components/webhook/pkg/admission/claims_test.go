package admission

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// The DRA world of these tests. Tenant acme owns tenantNS and draSameNS;
// tenant beta owns draBetaNS and the pool of betaNode. Each node's GPU
// driver publishes its devices in a pool named after the node.
const (
	draClass   = "gpu.nvidia.com"
	draDriver  = devices.NVIDIADriver
	draSameNS  = "acme-batch"
	draBetaNS  = "beta-ml"
	draNoPolNS = "acme-nopolicy"
	draClaim   = "c"
	draUID     = types.UID("claim-uid")
	// Devices of poolNode: draDev is exclusive and named by the evidence,
	// draDevCC runs in CC mode On, draDevNoEvidence is in the slice but
	// not in the evidence, draDevMismatch has another uuid in the slice
	// than in the evidence, draDevTwice is named twice by the evidence.
	draDev           = "gpu-0"
	draDevCC         = "gpu-cc"
	draDevNoEvidence = "gpu-unnamed"
	draDevMismatch   = "gpu-mismatch"
	draDevTwice      = "gpu-twice"
	// draDevGhost is in a slice of a node the cluster does not know;
	// draDevEverywhere in a slice of no node.
	draDevGhost      = "gpu-ghost"
	draDevEverywhere = "gpu-everywhere"
)

// timeSlicing is the NVIDIA driver's configuration that time-slices a GPU.
const timeSlicing = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`

// mpsSharing is the NVIDIA driver's configuration that shares a GPU by MPS.
const mpsSharing = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`

// fakeDevices is an informer cache of ResourceSlices and allocated claims.
type fakeDevices struct {
	unsynced bool
	slices   []*resourcev1.ResourceSlice
	holders  map[devices.Key][]ClaimRef
	reserved []*resourcev1.ResourceClaim
}

func (f *fakeDevices) Synced() bool { return !f.unsynced }

func (f *fakeDevices) Device(key devices.Key) (*resourcev1.ResourceSlice, *resourcev1.Device, bool) {
	for _, s := range f.slices {
		if s.Spec.Driver != key.Driver || s.Spec.Pool.Name != key.Pool {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == key.Device {
				return s, &s.Spec.Devices[i], true
			}
		}
	}
	return nil, nil, false
}

func (f *fakeDevices) Holders(key devices.Key) []ClaimRef { return f.holders[key] }

func (f *fakeDevices) ReservedFor(ns, pod string) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for _, c := range f.reserved {
		if c.Namespace != ns {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" && r.Name == pod {
				out = append(out, c)
			}
		}
	}
	return out
}

// hold records a claim as holding a device of a pool.
func (f *fakeDevices) hold(poolName, device, ns, name string, uid types.UID) {
	k := devices.Key{Driver: draDriver, Pool: poolName, Device: device}
	f.holders[k] = append(f.holders[k], ClaimRef{Namespace: ns, Name: name, UID: uid})
}

// sliceDevice is a device as the NVIDIA driver publishes it.
func sliceDevice(name, uuid string) resourcev1.Device {
	return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"uuid":        {StringValue: &uuid},
		"productName": {StringValue: draPtr("NVIDIA H100 80GB HBM3")},
		"type":        {StringValue: draPtr("gpu")},
	}}
}

func draPtr[T any](v T) *T { return &v }

// nodeSlice is the slice of a node's pool.
func nodeSlice(node string, devs ...resourcev1.Device) *resourcev1.ResourceSlice {
	var nodeName *string
	if node != "" {
		nodeName = draPtr(node)
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + draDriver},
		Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			NodeName: nodeName, Devices: devs},
	}
}

// evidenceDevice is a GPU of evidence named as DRA device device of the
// node's pool.
func evidenceDevice(node, device, id string) v1alpha1.GPUDevice {
	return v1alpha1.GPUDevice{ID: id, Vendor: "nvidia", Model: "NVIDIA-H100-80GB-HBM3", SharingMode: v1alpha1.SharingExclusive,
		DRA: &v1alpha1.DRADeviceRef{Driver: draDriver, Pool: node, Device: device}}
}

// draPolicy is acme's policy with a devices section: the NVIDIA class,
// two devices per request at most; time-slicing forbidden, attested
// evidence of pool acme required.
func draPolicy() v1alpha1.PlacementPolicySpec {
	return v1alpha1.PlacementPolicySpec{Confinement: v1alpha1.ConfinementPool,
		Evidence:   v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}},
		GPUSharing: &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}},
		Devices:    &v1alpha1.DevicePolicy{DeviceClasses: []string{draClass, "example.com"}, MaxDevicesPerRequest: draPtr(int64(2))},
	}
}

func acmeIdentity(spec v1alpha1.PlacementPolicySpec) Identity {
	return Identity{Protected: true, Labelled: true, Tenant: &wire.Tenant{ID: "acme"}, Policy: &wire.Policy{Name: "acme-policy", Spec: spec}}
}

// draWorld is newFakeCluster with DRA evidence and slices: poolNode (pool
// acme) and betaNode (pool beta) have evidence naming their DRA devices,
// plainNode has none.
func draWorld() (*fakeCluster, *fakeDevices) {
	c := newFakeCluster()
	c.identities[tenantNS] = acmeIdentity(draPolicy())
	c.identities[draSameNS] = acmeIdentity(draPolicy())
	c.identities[draBetaNS] = Identity{Protected: true, Labelled: true, Tenant: &wire.Tenant{ID: "beta"},
		Policy: &wire.Policy{Name: "beta-policy", Spec: draPolicy()}}
	c.identities[draNoPolNS] = Identity{Protected: true, Labelled: true, Tenant: &wire.Tenant{ID: "acme"}, Note: "no effectivePolicyRef"}

	st := attested(poolNode, v1alpha1.SharingExclusive)
	cc := evidenceDevice(poolNode, draDevCC, "GPU-cc")
	cc.CCMode = v1alpha1.CCModeOn
	st.Devices = []v1alpha1.GPUDevice{
		evidenceDevice(poolNode, draDev, "GPU-0"),
		cc,
		evidenceDevice(poolNode, draDevMismatch, "GPU-m"),
		evidenceDevice(poolNode, draDevTwice, "GPU-t1"),
		evidenceDevice(poolNode, draDevTwice, "GPU-t2"),
		// A time-sliced device of another name: narrowing keeps it out
		// of the judgement of every other device (no MIXED_POOL).
		{ID: "GPU-ts", Vendor: "nvidia", Model: "H100", SharingMode: v1alpha1.SharingTimeSlicing},
	}
	c.states[poolNode] = st
	bst := attested(betaNode, v1alpha1.SharingExclusive)
	bst.Devices = []v1alpha1.GPUDevice{evidenceDevice(betaNode, draDev, "GPU-b0")}
	c.states[betaNode] = bst

	d := &fakeDevices{holders: map[devices.Key][]ClaimRef{}, slices: []*resourcev1.ResourceSlice{
		nodeSlice(poolNode,
			sliceDevice(draDev, "GPU-0"), sliceDevice(draDevCC, "GPU-cc"), sliceDevice(draDevNoEvidence, "GPU-n"),
			sliceDevice(draDevMismatch, "GPU-not-m"), sliceDevice(draDevTwice, "GPU-t1")),
		nodeSlice(betaNode, sliceDevice(draDev, "GPU-b0")),
		nodeSlice(plainNode, sliceDevice(draDev, "GPU-p0")),
		nodeSlice("ghost", sliceDevice(draDevGhost, "GPU-g")),
		nodeSlice("", sliceDevice(draDevEverywhere, "GPU-e")),
	}}
	return c, d
}

// claimsValidator is a Validator with device enforcement on, judging with
// the real evaluator.
func claimsValidator(t *testing.T, c Cluster, d Devices) *Validator {
	t.Helper()
	v, err := New(Config{PoolLabel: pool, Cluster: c, Devices: d, Evaluator: localEvaluator(t), Profile: guard.ProfileProduction})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// claimRequest is a request for a resource.k8s.io resource.
func claimRequest(t *testing.T, resource, sub string, op admissionv1.Operation, ns string, obj, old runtime.Object) *admissionv1.AdmissionRequest {
	t.Helper()
	r := request(t, resource, sub, op, ns, "system:serviceaccount:kube-system:resourceclaim-controller", obj, old)
	r.Resource.Group = "resource.k8s.io"
	r.Name = draClaim
	return r
}

// wantCodes checks the answer: allowed when want is empty, else denied
// with exactly the reasons of want, in order.
func wantCodes(t *testing.T, resp *admissionv1.AdmissionResponse, want ...guard.Reason) {
	t.Helper()
	w := make([]string, len(want))
	for i, r := range want {
		w[i] = string(r)
	}
	if resp.Allowed != (len(want) == 0) {
		t.Fatalf("allowed = %v, want reasons %v; result: %+v", resp.Allowed, w, resp.Result)
	}
	if got := codes(resp); !slices.Equal(got, w) {
		t.Fatalf("reasons = %v, want %v; message: %s", got, w, resp.Result.Message)
	}
}

// causeFields returns the fields of a refusal's causes.
func causeFields(resp *admissionv1.AdmissionResponse) []string {
	if resp.Result == nil || resp.Result.Details == nil {
		return nil
	}
	var out []string
	for _, c := range resp.Result.Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

// --- claims and claim templates ---

func exact(class string, mod ...func(*resourcev1.ExactDeviceRequest)) resourcev1.DeviceRequest {
	e := &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}
	for _, m := range mod {
		m(e)
	}
	return resourcev1.DeviceRequest{Name: "gpu", Exactly: e}
}

func firstAvailable(classes ...string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: "gpu"}
	for i, c := range classes {
		r.FirstAvailable = append(r.FirstAvailable, resourcev1.DeviceSubRequest{Name: "s" + string(rune('a'+i)), DeviceClassName: c,
			AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1})
	}
	return r
}

func opaque(driver, params string, requests ...string) resourcev1.DeviceClaimConfiguration {
	return resourcev1.DeviceClaimConfiguration{Requests: requests, DeviceConfiguration: resourcev1.DeviceConfiguration{
		Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}
}

func claimSpec(reqs []resourcev1.DeviceRequest, configs ...resourcev1.DeviceClaimConfiguration) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs, Config: configs}}
}

func newClaim(ns string, spec resourcev1.ResourceClaimSpec) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: draClaim, Namespace: ns, UID: draUID},
		Spec:       spec,
	}
}

func newClaimTemplate(ns string, spec resourcev1.ResourceClaimSpec) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: ns},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: spec},
	}
}

func TestClaimRules(t *testing.T) {
	gpu := []resourcev1.DeviceRequest{exact(draClass)}
	yes := true
	cases := []struct {
		name string
		ns   string
		// policy replaces the devices section of tenantNS's policy.
		policy func(*v1alpha1.PlacementPolicySpec)
		spec   resourcev1.ResourceClaimSpec
		// lookupErr makes every Identity fail.
		lookupErr bool
		want      []guard.Reason
		// field is the field of the first cause, under the object's
		// spec (spec. for a claim, spec.spec. for a template), or of
		// the object itself when it starts with metadata.
		field string
	}{
		{name: "allowed class", spec: claimSpec(gpu)},
		{name: "second allowed class", spec: claimSpec([]resourcev1.DeviceRequest{exact("example.com")})},
		{name: "no requests at all", spec: claimSpec(nil)},
		{name: "G-DEVICE-CLAIMS class not listed", spec: claimSpec([]resourcev1.DeviceRequest{exact("gpu.amd.com")}),
			want: []guard.Reason{guard.ReasonDeviceClassNotAllowed}, field: "devices.requests[0].exactly.deviceClassName"},
		{name: "class differs only in case", spec: claimSpec([]resourcev1.DeviceRequest{exact("GPU.nvidia.com")}),
			want: []guard.Reason{guard.ReasonDeviceClassNotAllowed}, field: "devices.requests[0].exactly.deviceClassName"},
		{name: "policy without devices section refuses every class", policy: func(p *v1alpha1.PlacementPolicySpec) { p.Devices = nil },
			spec: claimSpec(gpu), want: []guard.Reason{guard.ReasonDeviceClassNotAllowed}, field: "devices.requests[0].exactly.deviceClassName"},
		{name: "policy with an empty devices section refuses every class", policy: func(p *v1alpha1.PlacementPolicySpec) { p.Devices = &v1alpha1.DevicePolicy{} },
			spec: claimSpec(gpu), want: []guard.Reason{guard.ReasonDeviceClassNotAllowed}, field: "devices.requests[0].exactly.deviceClassName"},
		{name: "second request of a forbidden class", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass), exact("fpga.example.com")}),
			want: []guard.Reason{guard.ReasonDeviceClassNotAllowed}, field: "devices.requests[1].exactly.deviceClassName"},
		{name: "firstAvailable of allowed classes", spec: claimSpec([]resourcev1.DeviceRequest{firstAvailable(draClass, "example.com")})},
		{name: "G-DEVICE-CLAIMS firstAvailable with a forbidden second subrequest", spec: claimSpec([]resourcev1.DeviceRequest{firstAvailable(draClass, "gpu.amd.com")}),
			want: []guard.Reason{guard.ReasonDeviceClassNotAllowed}, field: "devices.requests[0].firstAvailable[1].deviceClassName"},
		{name: "firstAvailable subrequest above the count", spec: claimSpec([]resourcev1.DeviceRequest{func() resourcev1.DeviceRequest {
			r := firstAvailable(draClass, draClass)
			r.FirstAvailable[1].Count = 3
			return r
		}()}), want: []guard.Reason{guard.ReasonDeviceCountExceeded}, field: "devices.requests[0].firstAvailable[1].count"},
		{name: "firstAvailable subrequest tolerating every taint", spec: claimSpec([]resourcev1.DeviceRequest{func() resourcev1.DeviceRequest {
			r := firstAvailable(draClass)
			r.FirstAvailable[0].Tolerations = []resourcev1.DeviceToleration{{Operator: resourcev1.DeviceTolerationOpExists}}
			return r
		}()}), want: []guard.Reason{guard.ReasonDeviceTaintTolerated}, field: "devices.requests[0].firstAvailable[0].tolerations[0]"},
		{name: "admin access", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) { e.AdminAccess = &yes })}),
			want: []guard.Reason{guard.ReasonDeviceAdminAccess}, field: "devices.requests[0].exactly.adminAccess"},
		{name: "admin access false", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) { e.AdminAccess = draPtr(false) })})},
		{name: "toleration of the guard's device taint", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
			e.Tolerations = []resourcev1.DeviceToleration{{Key: guard.DeviceTaintKey, Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		})}), want: []guard.Reason{guard.ReasonDeviceTaintTolerated}, field: "devices.requests[0].exactly.tolerations[0]"},
		{name: "toleration of another guard key", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
			e.Tolerations = []resourcev1.DeviceToleration{{Key: "guard.xila.us/other", Operator: resourcev1.DeviceTolerationOpEqual, Value: "x"}}
		})}), want: []guard.Reason{guard.ReasonDeviceTaintTolerated}, field: "devices.requests[0].exactly.tolerations[0]"},
		{name: "toleration of every taint", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
			e.Tolerations = []resourcev1.DeviceToleration{
				{Key: "example.com/maintenance", Operator: resourcev1.DeviceTolerationOpExists},
				{Operator: resourcev1.DeviceTolerationOpExists},
			}
		})}), want: []guard.Reason{guard.ReasonDeviceTaintTolerated}, field: "devices.requests[0].exactly.tolerations[1]"},
		{name: "toleration of an unrelated key", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
			e.Tolerations = []resourcev1.DeviceToleration{{Key: "example.com/maintenance", Operator: resourcev1.DeviceTolerationOpExists}}
		})})},
		{name: "toleration of a key that merely contains the guard's group", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
			e.Tolerations = []resourcev1.DeviceToleration{{Key: "notguard.xila.us/device-evidence", Operator: resourcev1.DeviceTolerationOpExists}}
		})})},
		{name: "allocationMode All refused", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
			e.AllocationMode, e.Count = resourcev1.DeviceAllocationModeAll, 0
		})}), want: []guard.Reason{guard.ReasonDeviceCountExceeded}, field: "devices.requests[0].exactly.allocationMode"},
		{name: "allocationMode All allowed by the policy", policy: func(p *v1alpha1.PlacementPolicySpec) { p.Devices.AllowAllocationModeAll = true },
			spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
				e.AllocationMode, e.Count = resourcev1.DeviceAllocationModeAll, 0
			})})},
		{name: "count at the maximum", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) { e.Count = 2 })})},
		{name: "count above the maximum", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) { e.Count = 3 })}),
			want: []guard.Reason{guard.ReasonDeviceCountExceeded}, field: "devices.requests[0].exactly.count"},
		{name: "any count without a maximum", policy: func(p *v1alpha1.PlacementPolicySpec) { p.Devices.MaxDevicesPerRequest = nil },
			spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) { e.Count = 64 })})},
		{name: "capacity request refused", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
			e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}}
		})}), want: []guard.Reason{guard.ReasonDeviceCapacityRequest}, field: "devices.requests[0].exactly.capacity"},
		{name: "capacity request allowed by the policy", policy: func(p *v1alpha1.PlacementPolicySpec) { p.Devices.AllowCapacityRequests = true },
			spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
				e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}}
			})})},
		{name: "empty capacity requirements ask for nothing", spec: claimSpec([]resourcev1.DeviceRequest{exact(draClass, func(e *resourcev1.ExactDeviceRequest) {
			e.Capacity = &resourcev1.CapacityRequirements{}
		})})},
		{name: "every rule broken at once", spec: claimSpec([]resourcev1.DeviceRequest{exact("gpu.amd.com", func(e *resourcev1.ExactDeviceRequest) {
			e.AdminAccess = &yes
			e.Tolerations = []resourcev1.DeviceToleration{{Key: guard.DeviceTaintKey, Operator: resourcev1.DeviceTolerationOpExists}}
			e.Count = 9
			e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"cores": resource.MustParse("1")}}
		})}, opaque("fpga.example.com", `{}`)), want: []guard.Reason{
			guard.ReasonDeviceClassNotAllowed, guard.ReasonDeviceAdminAccess, guard.ReasonDeviceTaintTolerated,
			guard.ReasonDeviceCountExceeded, guard.ReasonDeviceCapacityRequest, guard.ReasonDeviceConfigNotAllowed,
		}, field: "devices.requests[0].exactly.deviceClassName"},
		{name: "NVIDIA time-slicing under a policy forbidding it", spec: claimSpec(gpu, opaque(draDriver, timeSlicing)),
			want: []guard.Reason{guard.ReasonDeviceSharingForbidden}, field: "devices.config[0].opaque"},
		{name: "NVIDIA time-slicing for one request under a policy forbidding it", spec: claimSpec(gpu, opaque(draDriver, timeSlicing, "gpu")),
			want: []guard.Reason{guard.ReasonDeviceSharingForbidden}, field: "devices.config[0].opaque"},
		{name: "NVIDIA time-slicing outside the policy's allowed modes",
			policy: func(p *v1alpha1.PlacementPolicySpec) {
				p.GPUSharing = &v1alpha1.GPUSharingPolicy{AllowedModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingExclusive}}
			},
			spec: claimSpec(gpu, opaque(draDriver, timeSlicing)), want: []guard.Reason{guard.ReasonDeviceSharingForbidden}, field: "devices.config[0].opaque"},
		{name: "NVIDIA time-slicing not forbidden", policy: func(p *v1alpha1.PlacementPolicySpec) { p.GPUSharing = nil },
			spec: claimSpec(gpu, opaque(draDriver, timeSlicing))},
		{name: "NVIDIA MPS when only time-slicing is forbidden", spec: claimSpec(gpu, opaque(draDriver, mpsSharing))},
		{name: "NVIDIA configuration without sharing", spec: claimSpec(gpu, opaque(draDriver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"}`))},
		{name: "NVIDIA configuration of a kind that is not read", spec: claimSpec(gpu, opaque(draDriver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"Mystery"}`)),
			want: []guard.Reason{guard.ReasonDeviceConfigNotAllowed}, field: "devices.config[0].opaque"},
		{name: "NVIDIA sharing strategy that is not read", spec: claimSpec(gpu, opaque(draDriver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"Magic"}}`)),
			want: []guard.Reason{guard.ReasonDeviceConfigNotAllowed}, field: "devices.config[0].opaque"},
		{name: "example driver's space partitioning counts as MPS", policy: func(p *v1alpha1.PlacementPolicySpec) {
			p.GPUSharing = &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingMPS}}
		}, spec: claimSpec(gpu, opaque(devices.ExampleDriver, `{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"SpacePartitioning"}}`)),
			want: []guard.Reason{guard.ReasonDeviceSharingForbidden}, field: "devices.config[0].opaque"},
		{name: "opaque configuration of an unknown driver", spec: claimSpec(gpu, opaque("fpga.example.com", `{"kind":"X"}`)),
			want: []guard.Reason{guard.ReasonDeviceConfigNotAllowed}, field: "devices.config[0].opaque"},
		{name: "opaque configuration of an unknown driver without devices section", policy: func(p *v1alpha1.PlacementPolicySpec) { p.Devices = nil },
			spec: claimSpec(nil, opaque("fpga.example.com", `{"kind":"X"}`)),
			want: []guard.Reason{guard.ReasonDeviceConfigNotAllowed}, field: "devices.config[0].opaque"},
		{name: "opaque configuration of a listed driver", policy: func(p *v1alpha1.PlacementPolicySpec) {
			p.Devices.OpaqueConfigDrivers = []string{"fpga.example.com"}
		}, spec: claimSpec(gpu, opaque("fpga.example.com", `{"kind":"X"}`))},
		{name: "listing the NVIDIA driver does not let its sharing through", policy: func(p *v1alpha1.PlacementPolicySpec) {
			p.Devices.OpaqueConfigDrivers = []string{draDriver}
		}, spec: claimSpec(gpu, opaque(draDriver, timeSlicing)), want: []guard.Reason{guard.ReasonDeviceSharingForbidden}, field: "devices.config[0].opaque"},
		{name: "second configuration of an unknown driver", spec: claimSpec(gpu, opaque(draDriver, mpsSharing), opaque("fpga.example.com", `{}`)),
			want: []guard.Reason{guard.ReasonDeviceConfigNotAllowed}, field: "devices.config[1].opaque"},
		{name: "claim of no tenant asks for anything", ns: plainNS, spec: claimSpec([]resourcev1.DeviceRequest{exact("gpu.amd.com", func(e *resourcev1.ExactDeviceRequest) {
			e.AdminAccess = &yes
			e.AllocationMode = resourcev1.DeviceAllocationModeAll
			e.Tolerations = []resourcev1.DeviceToleration{{Operator: resourcev1.DeviceTolerationOpExists}}
		})}, opaque(draDriver, timeSlicing), opaque("fpga.example.com", `{}`))},
		{name: "claim of an unresolved tenant", ns: "orphaned", spec: claimSpec(gpu),
			want: []guard.Reason{guard.ReasonTenantUnresolved}, field: "metadata.namespace"},
		{name: "claim of a tenant without policy", ns: draNoPolNS, spec: claimSpec(gpu),
			want: []guard.Reason{guard.ReasonNoPolicy}, field: "metadata.namespace"},
		{name: "identity lookup fails", lookupErr: true, spec: claimSpec(gpu),
			want: []guard.Reason{guard.ReasonLookupFailed}, field: "metadata.namespace"},
		{name: "identity lookup fails for a namespace of no tenant", ns: plainNS, lookupErr: true, spec: claimSpec(gpu),
			want: []guard.Reason{guard.ReasonLookupFailed}, field: "metadata.namespace"},
	}
	for _, tc := range cases {
		for _, kind := range []string{"claim", "template"} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				c, d := draWorld()
				if tc.policy != nil {
					p := draPolicy()
					tc.policy(&p)
					c.identities[tenantNS] = acmeIdentity(p)
				}
				if tc.lookupErr {
					c.err = errBoom
				}
				ns := tc.ns
				if ns == "" {
					ns = tenantNS
				}
				v := claimsValidator(t, c, d)
				var req *admissionv1.AdmissionRequest
				prefix := "spec."
				if kind == "claim" {
					req = claimRequest(t, "resourceclaims", "", admissionv1.Create, ns, newClaim(ns, tc.spec), nil)
				} else {
					req = claimRequest(t, "resourceclaimtemplates", "", admissionv1.Create, ns, newClaimTemplate(ns, tc.spec), nil)
					prefix = "spec.spec."
				}
				resp := post(t, v.ClaimsHandler(), req)
				wantCodes(t, resp, tc.want...)
				if tc.field != "" {
					want := prefix + tc.field
					if strings.HasPrefix(tc.field, "metadata.") {
						want = tc.field
					}
					if f := causeFields(resp); len(f) == 0 || f[0] != want {
						t.Fatalf("fields = %v, want the first %s", f, want)
					}
				}
				if !resp.Allowed {
					subject := "resourceclaim " + ns + "/" + draClaim
					if kind == "template" {
						subject = "resourceclaimtemplate " + ns + "/t"
					}
					if !strings.Contains(resp.Result.Message, subject) {
						t.Fatalf("message %q does not name %s", resp.Result.Message, subject)
					}
				}
			})
		}
	}
}

// An UPDATE of a claim is judged as its CREATE is.
// G-DEVICE-CLAIMS an UPDATE that leaves the spec as it was (a finalizer
// removed as the claim is deleted) is allowed whatever the spec asks.
func TestClaimUpdateKeepingSpec(t *testing.T) {
	c, d := draWorld()
	v := claimsValidator(t, c, d)
	bad := newClaim(tenantNS, claimSpec([]resourcev1.DeviceRequest{exact("gpu.amd.com")}))
	before := bad.DeepCopy()
	before.Finalizers = []string{"resource.kubernetes.io/delete-protection"}
	wantCodes(t, post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "", admissionv1.Update, tenantNS, bad, before)))
	tmpl := newClaimTemplate(tenantNS, bad.Spec)
	oldTmpl := tmpl.DeepCopy()
	oldTmpl.Labels = map[string]string{"a": "b"}
	wantCodes(t, post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaimtemplates", "", admissionv1.Update, tenantNS, tmpl, oldTmpl)))
	// The same write as a CREATE is refused.
	wantCodes(t, post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "", admissionv1.Create, tenantNS, bad, nil)),
		guard.ReasonDeviceClassNotAllowed)
}

func TestClaimUpdateJudged(t *testing.T) {
	c, d := draWorld()
	v := claimsValidator(t, c, d)
	bad := newClaim(tenantNS, claimSpec([]resourcev1.DeviceRequest{exact("gpu.amd.com")}))
	good := newClaim(tenantNS, claimSpec([]resourcev1.DeviceRequest{exact(draClass)}))
	wantCodes(t, post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "", admissionv1.Update, tenantNS, bad, good)),
		guard.ReasonDeviceClassNotAllowed)
	wantCodes(t, post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "", admissionv1.Update, tenantNS, good, bad)))
}

// --- allocations ---

// allocation result of a device of the NVIDIA driver.
func allocResult(poolName, device string, mod ...func(*resourcev1.DeviceRequestAllocationResult)) resourcev1.DeviceRequestAllocationResult {
	r := resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: draDriver, Pool: poolName, Device: device}
	for _, m := range mod {
		m(&r)
	}
	return r
}

// allocatedClaim is the claim of ns allocated results, reserved for a pod.
func allocatedClaim(ns string, results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
	c := newClaim(ns, claimSpec([]resourcev1.DeviceRequest{exact(draClass)}))
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
	return c
}

func podConsumer(name string) resourcev1.ResourceClaimConsumerReference {
	return resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: name, UID: types.UID("pod-" + name)}
}

func withConfig(c *resourcev1.ResourceClaim, params string, requests ...string) *resourcev1.ResourceClaim {
	c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, resourcev1.DeviceAllocationConfiguration{
		Source: resourcev1.AllocationConfigSourceClass, Requests: requests,
		DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
			Driver: draDriver, Parameters: runtime.RawExtension{Raw: []byte(params)}}},
	})
	return c
}

func reserved(c *resourcev1.ResourceClaim, consumers ...resourcev1.ResourceClaimConsumerReference) *resourcev1.ResourceClaim {
	c.Status.ReservedFor = consumers
	return c
}

const fpgaDriver = "fpga.example.com"

// withFPGA adds to poolNode a device of a driver whose configuration the
// webhook does not read, published and named by the evidence.
func withFPGA(c *fakeCluster, d *fakeDevices) {
	s := nodeSlice(poolNode, resourcev1.Device{Name: "fpga-0"})
	s.Spec.Driver = fpgaDriver
	d.slices = append(d.slices, s)
	e := evidenceDevice(poolNode, "fpga-0", "FPGA-0")
	e.DRA.Driver = fpgaDriver
	c.states[poolNode].Devices = append(c.states[poolNode].Devices, e)
}

// identityFailing fails Identity for one namespace only.
type identityFailing struct {
	*fakeCluster
	ns string
}

func (f identityFailing) Identity(ctx context.Context, ns string) (Identity, error) {
	if ns == f.ns {
		return Identity{}, errBoom
	}
	return f.fakeCluster.Identity(ctx, ns)
}

func TestAllocationRules(t *testing.T) {
	shareID := types.UID("share-1")
	yes := true
	stale := func(c *fakeCluster, _ *fakeDevices) {
		c.states[poolNode].ObservedAt = metav1.NewTime(time.Now().Add(-time.Hour))
	}
	cases := []struct {
		name string
		ns   string
		// old is the claim before the write: unallocated when nil.
		old *resourcev1.ResourceClaim
		now *resourcev1.ResourceClaim
		// setup changes the world.
		setup func(*fakeCluster, *fakeDevices)
		// policy changes tenantNS's policy.
		policy func(*v1alpha1.PlacementPolicySpec)
		// failNS fails the Identity of that namespace only.
		failNS string
		want   []guard.Reason
		// field is the field of the first cause.
		field string
	}{
		// What hands nothing out.
		{name: "allocation removed", old: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p")),
			now: newClaim(tenantNS, claimSpec(nil)), setup: func(c *fakeCluster, _ *fakeDevices) { c.err = errBoom }},
		{name: "allocation removed from a claim of no tenant on a pool node", ns: plainNS,
			old: allocatedClaim(plainNS, allocResult(poolNode, draDev)), now: newClaim(plainNS, claimSpec(nil))},
		{name: "device conditions change, allocation and consumers kept, evidence now stale",
			old: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p")),
			now: func() *resourcev1.ResourceClaim {
				c := reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p"))
				c.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: draDriver, Pool: poolNode, Device: draDev,
					Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}}}
				return c
			}(),
			setup: stale},
		{name: "consumer removed, evidence now missing",
			old:   reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p"), podConsumer("q")),
			now:   reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("q")),
			setup: func(c *fakeCluster, _ *fakeDevices) { delete(c.states, poolNode) }},
		{name: "allocation kept, consumers kept, device now held by another tenant",
			old:   reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p")),
			now:   reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p")),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, draBetaNS, "b", "b-uid") }},

		// A new allocation of a tenant's claim.
		{name: "G-DEVICE-ALLOCATION device with fresh, compliant evidence", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev))},
		{name: "device of a firstAvailable subrequest", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev, func(r *resourcev1.DeviceRequestAllocationResult) {
			r.Request = "gpu/sa"
		}))},
		{name: "device in no slice", now: allocatedClaim(tenantNS, allocResult(poolNode, "gpu-nowhere")),
			want: []guard.Reason{guard.ReasonDeviceUnknown}, field: "status.allocation.devices.results[0]"},
		{name: "device of another driver", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev, func(r *resourcev1.DeviceRequestAllocationResult) {
			r.Driver = devices.ExampleDriver
		})), want: []guard.Reason{guard.ReasonDeviceUnknown}, field: "status.allocation.devices.results[0]"},
		{name: "device on a node the cluster does not know", now: allocatedClaim(tenantNS, allocResult("ghost", draDevGhost)),
			want: []guard.Reason{guard.ReasonDeviceUnknown}, field: "status.allocation.devices.results[0]"},
		{name: "device on no node", now: allocatedClaim(tenantNS, allocResult("", draDevEverywhere)),
			want: []guard.Reason{guard.ReasonDeviceUnknown}, field: "status.allocation.devices.results[0]"},
		{name: "device the node's evidence does not name", now: allocatedClaim(tenantNS, allocResult(poolNode, draDevNoEvidence)),
			want: []guard.Reason{guard.ReasonDeviceEvidenceMissing}, field: "status.allocation.devices.results[0]"},
		{name: "device on a node without evidence", now: allocatedClaim(tenantNS, allocResult(plainNode, draDev)),
			want: []guard.Reason{guard.ReasonDeviceEvidenceMissing}, field: "status.allocation.devices.results[0]"},
		{name: "evidence device named only by ID, not by DRA", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(c *fakeCluster, _ *fakeDevices) { c.states[poolNode].Devices[0].DRA = nil },
			want:  []guard.Reason{guard.ReasonDeviceEvidenceMissing}, field: "status.allocation.devices.results[0]"},
		{name: "slice uuid disagrees with the evidence", now: allocatedClaim(tenantNS, allocResult(poolNode, draDevMismatch)),
			want: []guard.Reason{guard.ReasonDeviceEvidenceMismatch}, field: "status.allocation.devices.results[0]"},
		{name: "slice type mig, evidence of a whole GPU", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) {
				d.slices[0].Spec.Devices[0].Attributes["type"] = resourcev1.DeviceAttribute{StringValue: draPtr("mig")}
			},
			want: []guard.Reason{guard.ReasonDeviceEvidenceMismatch}, field: "status.allocation.devices.results[0]"},
		{name: "slice model spelled otherwise agrees", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) {
				d.slices[0].Spec.Devices[0].Attributes["productName"] = resourcev1.DeviceAttribute{StringValue: draPtr("nvidia_h100_80gb_hbm3")}
			}},
		{name: "slice model disagrees", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) {
				d.slices[0].Spec.Devices[0].Attributes["productName"] = resourcev1.DeviceAttribute{StringValue: draPtr("NVIDIA A100")}
			},
			want: []guard.Reason{guard.ReasonDeviceEvidenceMismatch}, field: "status.allocation.devices.results[0]"},
		{name: "evidence names the device twice", now: allocatedClaim(tenantNS, allocResult(poolNode, draDevTwice)),
			want: []guard.Reason{guard.ReasonDeviceEvidenceMismatch}, field: "status.allocation.devices.results[0]"},
		{name: "class configuration time-slices under a policy forbidding it",
			now:  withConfig(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), timeSlicing),
			want: []guard.Reason{guard.ReasonDeviceSharingForbidden, guard.ReasonTimeSlicingForbidden}, field: "status.allocation.devices.results[0]"},
		{name: "class configuration time-slices the parent request of a subrequest",
			now: withConfig(allocatedClaim(tenantNS, allocResult(poolNode, draDev, func(r *resourcev1.DeviceRequestAllocationResult) {
				r.Request = "gpu/sa"
			})), timeSlicing, "gpu"),
			want: []guard.Reason{guard.ReasonDeviceSharingForbidden, guard.ReasonTimeSlicingForbidden}, field: "status.allocation.devices.results[0]"},
		{name: "class configuration time-slices another request only",
			now: withConfig(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), timeSlicing, "other")},
		{name: "class configuration time-slices, policy allows it", policy: func(p *v1alpha1.PlacementPolicySpec) { p.GPUSharing = nil },
			now: withConfig(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), timeSlicing)},
		{name: "class configuration shares by MPS, the evaluator judges the device as MPS-shared",
			policy: func(p *v1alpha1.PlacementPolicySpec) {
				p.GPUSharing = &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingMPS}}
			},
			now:  withConfig(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), mpsSharing),
			want: []guard.Reason{guard.ReasonDeviceSharingForbidden, guard.ReasonMPSForbidden}, field: "status.allocation.devices.results[0]"},
		{name: "configuration of another driver does not set up the device",
			now: func() *resourcev1.ResourceClaim {
				c := withConfig(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), timeSlicing)
				c.Status.Allocation.Devices.Config[0].Opaque.Driver = devices.ExampleDriver
				return c
			}()},
		{name: "NVIDIA configuration of a kind that is not read",
			now:  withConfig(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"Mystery"}`),
			want: []guard.Reason{guard.ReasonDeviceConfigNotAllowed}, field: "status.allocation.devices.results[0]"},
		{name: "configuration of a driver that is not read, for its device",
			now: func() *resourcev1.ResourceClaim {
				c := withConfig(allocatedClaim(tenantNS, allocResult(poolNode, "fpga-0", func(r *resourcev1.DeviceRequestAllocationResult) {
					r.Driver = fpgaDriver
				})), `{"kind":"Bitstream"}`)
				c.Status.Allocation.Devices.Config[0].Opaque.Driver = fpgaDriver
				return c
			}(),
			setup: withFPGA,
			want:  []guard.Reason{guard.ReasonDeviceConfigNotAllowed}, field: "status.allocation.devices.results[0]"},
		{name: "configuration of a listed driver that is not read, for its device",
			policy: func(p *v1alpha1.PlacementPolicySpec) { p.Devices.OpaqueConfigDrivers = []string{fpgaDriver} },
			now: func() *resourcev1.ResourceClaim {
				c := withConfig(allocatedClaim(tenantNS, allocResult(poolNode, "fpga-0", func(r *resourcev1.DeviceRequestAllocationResult) {
					r.Driver = fpgaDriver
				})), `{"kind":"Bitstream"}`)
				c.Status.Allocation.Devices.Config[0].Opaque.Driver = fpgaDriver
				return c
			}(),
			setup: withFPGA},
		{name: "CC-mode device without sharing", now: allocatedClaim(tenantNS, allocResult(poolNode, draDevCC))},
		{name: "CC-mode device given out as a share",
			policy: func(p *v1alpha1.PlacementPolicySpec) { p.Devices.AllowCapacityRequests = true },
			now: allocatedClaim(tenantNS, allocResult(poolNode, draDevCC, func(r *resourcev1.DeviceRequestAllocationResult) {
				r.ShareID = &shareID
			})),
			want: []guard.Reason{guard.ReasonDeviceSharingForbidden}, field: "status.allocation.devices.results[0]"},
		{name: "CC-mode device given out as a share the policy does not allow",
			now: allocatedClaim(tenantNS, allocResult(poolNode, draDevCC, func(r *resourcev1.DeviceRequestAllocationResult) {
				r.ShareID = &shareID
			})),
			want: []guard.Reason{guard.ReasonDeviceCapacityRequest, guard.ReasonDeviceSharingForbidden}, field: "status.allocation.devices.results[0].shareID"},
		{name: "CC-mode device shared by MPS the policy allows",
			now:  withConfig(allocatedClaim(tenantNS, allocResult(poolNode, draDevCC)), mpsSharing),
			want: []guard.Reason{guard.ReasonDeviceSharingForbidden}, field: "status.allocation.devices.results[0]"},
		{name: "device given out as a share of its capacity the policy does not allow",
			now: allocatedClaim(tenantNS, allocResult(poolNode, draDev, func(r *resourcev1.DeviceRequestAllocationResult) {
				r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}
			})),
			want: []guard.Reason{guard.ReasonDeviceCapacityRequest}, field: "status.allocation.devices.results[0].shareID"},
		{name: "device given out as a share of its capacity the policy allows",
			policy: func(p *v1alpha1.PlacementPolicySpec) { p.Devices.AllowCapacityRequests = true },
			now: allocatedClaim(tenantNS, allocResult(poolNode, draDev, func(r *resourcev1.DeviceRequestAllocationResult) {
				r.ShareID = &shareID
			}))},
		{name: "admin access allocated to a tenant's claim",
			now:  allocatedClaim(tenantNS, allocResult(poolNode, draDev, func(r *resourcev1.DeviceRequestAllocationResult) { r.AdminAccess = &yes })),
			want: []guard.Reason{guard.ReasonDeviceAdminAccess}, field: "status.allocation.devices.results[0].adminAccess"},
		{name: "device on another tenant's pool node", now: allocatedClaim(tenantNS, allocResult(betaNode, draDev)),
			want: []guard.Reason{guard.ReasonTenantMismatch}, field: "status.allocation.devices.results[0]"},
		{name: "device on a node of no pool under confinement Pool", now: allocatedClaim(tenantNS, allocResult(plainNode, draDev)),
			setup: func(c *fakeCluster, _ *fakeDevices) {
				st := attested(plainNode, v1alpha1.SharingExclusive)
				st.NodeUID = ""
				st.Devices = []v1alpha1.GPUDevice{evidenceDevice(plainNode, draDev, "GPU-p0")}
				c.states[plainNode] = st
			},
			want: []guard.Reason{guard.ReasonOutsidePool}, field: "status.allocation.devices.results[0]"},
		{name: "stale evidence", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			policy: func(p *v1alpha1.PlacementPolicySpec) {
				p.Evidence.MaxAge = &metav1.Duration{Duration: 30 * time.Minute}
			},
			setup: stale,
			want:  []guard.Reason{guard.ReasonEvidenceStale}, field: "status.allocation.devices.results[0]"},
		{name: "evidence of the default max age is stale", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: stale, want: []guard.Reason{guard.ReasonEvidenceStale}},
		{name: "evidence an hour old under a max age of two hours", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			policy: func(p *v1alpha1.PlacementPolicySpec) { p.Evidence.MaxAge = &metav1.Duration{Duration: 2 * time.Hour} },
			setup:  stale},
		{name: "G-DEVICE-ALLOCATION device held by a claim of another tenant", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, draBetaNS, "b", "b-uid") },
			want:  []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "device held by a claim of no tenant", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, plainNS, "w", "w-uid") },
			want:  []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "device held by a claim of an unresolved tenant", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, "orphaned", "o", "o-uid") },
			want:  []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "device held by a claim whose tenant cannot be told", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			failNS: "flaky",
			setup:  func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, "flaky", "f", "f-uid") },
			want:   []guard.Reason{guard.ReasonLookupFailed}, field: "status.allocation.devices.results[0]"},
		{name: "device held by a claim of the same tenant in another namespace", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, draSameNS, "s", "s-uid") }},
		{name: "device held by the claim itself", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, tenantNS, draClaim, draUID) }},
		{name: "device held by the claim itself, known by name only", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, tenantNS, draClaim, "") }},
		{name: "device held by a claim of the same name in another tenant's namespace", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, draBetaNS, draClaim, "b-uid") },
			want:  []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "device held by the claim itself, known by UID only", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, "", "", draUID) }},
		{name: "device held by the claim itself and another tenant's", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) {
				d.hold(poolNode, draDev, tenantNS, draClaim, draUID)
				d.hold(poolNode, draDev, draBetaNS, "b", "b-uid")
			},
			want: []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "another device held by another tenant", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDevCC, draBetaNS, "b", "b-uid") }},
		{name: "second of two devices is bad", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev), allocResult(poolNode, draDevNoEvidence)),
			want: []guard.Reason{guard.ReasonDeviceEvidenceMissing}, field: "status.allocation.devices.results[1]"},
		{name: "both of two devices are bad", now: allocatedClaim(tenantNS, allocResult(betaNode, draDev), allocResult(poolNode, "gpu-nowhere")),
			want: []guard.Reason{guard.ReasonTenantMismatch, guard.ReasonDeviceUnknown}, field: "status.allocation.devices.results[0]"},
		{name: "allocation of an unresolved tenant's claim", ns: "orphaned", now: allocatedClaim("orphaned", allocResult(poolNode, draDev)),
			want: []guard.Reason{guard.ReasonTenantUnresolved}, field: "metadata.namespace"},
		{name: "allocation of the claim of a tenant without policy", ns: draNoPolNS, now: allocatedClaim(draNoPolNS, allocResult(poolNode, draDev)),
			want: []guard.Reason{guard.ReasonNoPolicy}, field: "metadata.namespace"},
		{name: "identity lookup fails", now: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			setup: func(c *fakeCluster, _ *fakeDevices) { c.err = errBoom },
			want:  []guard.Reason{guard.ReasonLookupFailed}, field: "metadata.namespace"},

		// Consumers.
		{name: "allocated with a pod consumer", now: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p"))},
		{name: "a pod consumer is added", old: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p")),
			now: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p"), podConsumer("q"))},
		{name: "a pod consumer is added, evidence now stale", old: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p")),
			now:   reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p"), podConsumer("q")),
			setup: stale, want: []guard.Reason{guard.ReasonEvidenceStale}, field: "status.allocation.devices.results[0]"},
		{name: "a pod consumer is added, device now held by another tenant", old: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			now:   reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("q")),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(poolNode, draDev, draBetaNS, "b", "b-uid") },
			want:  []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "a consumer that is not a pod is added", old: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p")),
			now: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p"),
				resourcev1.ResourceClaimConsumerReference{APIGroup: "apps", Resource: "deployments", Name: "d", UID: "d-uid"}),
			want: []guard.Reason{guard.ReasonDeviceConsumerNotAllowed}, field: "status.reservedFor[1]"},
		{name: "a consumer of another group's pods is added", old: allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
			now: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
				resourcev1.ResourceClaimConsumerReference{APIGroup: "example.com", Resource: "pods", Name: "x", UID: "x-uid"}),
			want: []guard.Reason{guard.ReasonDeviceConsumerNotAllowed}, field: "status.reservedFor[0]"},
		{name: "a consumer that is not a pod is kept while a pod is added",
			old: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
				resourcev1.ResourceClaimConsumerReference{APIGroup: "apps", Resource: "deployments", Name: "d", UID: "d-uid"}),
			now: reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)),
				resourcev1.ResourceClaimConsumerReference{APIGroup: "apps", Resource: "deployments", Name: "d", UID: "d-uid"}, podConsumer("q"))},
		{name: "a consumer that is not a pod, of a claim of no tenant", ns: plainNS, old: allocatedClaim(plainNS, allocResult(plainNode, draDev)),
			now: reserved(allocatedClaim(plainNS, allocResult(plainNode, draDev)),
				resourcev1.ResourceClaimConsumerReference{APIGroup: "apps", Resource: "deployments", Name: "d", UID: "d-uid"})},

		// Claims of no tenant.
		{name: "claim of no tenant allocated a device on a pool node", ns: plainNS, now: allocatedClaim(plainNS, allocResult(poolNode, draDev)),
			want: []guard.Reason{guard.ReasonDeviceInForeignPool}, field: "status.allocation.devices.results[0]"},
		{name: "claim of no tenant allocated a device on another pool's node", ns: plainNS, now: allocatedClaim(plainNS, allocResult(betaNode, draDev)),
			want: []guard.Reason{guard.ReasonDeviceInForeignPool}, field: "status.allocation.devices.results[0]"},
		{name: "claim of no tenant allocated with admin access a device on a pool node", ns: plainNS,
			now:  allocatedClaim(plainNS, allocResult(poolNode, draDev, func(r *resourcev1.DeviceRequestAllocationResult) { r.AdminAccess = &yes })),
			want: []guard.Reason{guard.ReasonDeviceInForeignPool}, field: "status.allocation.devices.results[0]"},
		{name: "claim of no tenant allocated a device on a plain node", ns: plainNS, now: allocatedClaim(plainNS, allocResult(plainNode, draDev))},
		{name: "claim of no tenant allocated a device in no slice", ns: plainNS, now: allocatedClaim(plainNS, allocResult(poolNode, "gpu-nowhere")),
			want: []guard.Reason{guard.ReasonDeviceUnknown}, field: "status.allocation.devices.results[0]"},
		{name: "claim of no tenant allocated a device a tenant holds", ns: plainNS, now: allocatedClaim(plainNS, allocResult(plainNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(plainNode, draDev, tenantNS, "t", "t-uid") },
			want:  []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "claim of no tenant allocated a device whose holder's tenant cannot be told", ns: plainNS, now: allocatedClaim(plainNS, allocResult(plainNode, draDev)),
			failNS: "flaky",
			setup:  func(_ *fakeCluster, d *fakeDevices) { d.hold(plainNode, draDev, "flaky", "f", "f-uid") },
			want:   []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "claim of no tenant allocated a device another claim of no tenant holds", ns: plainNS, now: allocatedClaim(plainNS, allocResult(plainNode, draDev)),
			setup: func(_ *fakeCluster, d *fakeDevices) {
				d.hold(plainNode, draDev, "other-web", "w", "w-uid")
				d.hold(plainNode, draDev, plainNS, draClaim, draUID)
			}},
		{name: "claim of no tenant allocated with admin access a device a tenant holds", ns: plainNS,
			now:   allocatedClaim(plainNS, allocResult(plainNode, draDev, func(r *resourcev1.DeviceRequestAllocationResult) { r.AdminAccess = &yes })),
			setup: func(_ *fakeCluster, d *fakeDevices) { d.hold(plainNode, draDev, tenantNS, "t", "t-uid") },
			want:  []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "claim of no tenant allocated a device on a node the webhook does not know", ns: plainNS,
			now:  allocatedClaim(plainNS, allocResult("ghost", draDevGhost)),
			want: []guard.Reason{guard.ReasonDeviceUnknown}, field: "status.allocation.devices.results[0]"},
		{name: "claim of no tenant allocated a device of no single node", ns: plainNS,
			now: allocatedClaim(plainNS, allocResult("", draDevEverywhere))},
		{name: "confinement Any: a device of a node of no pool, without evidence, is not judged",
			now:    allocatedClaim(tenantNS, allocResult(plainNode, draDev)),
			policy: func(p *v1alpha1.PlacementPolicySpec) { p.Confinement = v1alpha1.ConfinementAny }},
		{name: "confinement Any: a device of a node of no pool that another tenant holds",
			now:    allocatedClaim(tenantNS, allocResult(plainNode, draDev)),
			policy: func(p *v1alpha1.PlacementPolicySpec) { p.Confinement = v1alpha1.ConfinementAny },
			setup:  func(_ *fakeCluster, d *fakeDevices) { d.hold(plainNode, draDev, draBetaNS, "b", "b-uid") },
			want:   []guard.Reason{guard.ReasonDeviceHeldByOtherTenant}, field: "status.allocation.devices.results[0]"},
		{name: "confinement Any: a pool node's device without evidence is still refused",
			now:    allocatedClaim(tenantNS, allocResult(poolNode, draDevNoEvidence)),
			policy: func(p *v1alpha1.PlacementPolicySpec) { p.Confinement = v1alpha1.ConfinementAny },
			want:   []guard.Reason{guard.ReasonDeviceEvidenceMissing}, field: "status.allocation.devices.results[0]"},
		{name: "CC-mode device the evidence says is time-sliced, with no sharing configuration",
			now:    allocatedClaim(tenantNS, allocResult(poolNode, draDevCC)),
			policy: func(p *v1alpha1.PlacementPolicySpec) { p.GPUSharing = nil },
			setup: func(c *fakeCluster, _ *fakeDevices) {
				c.states[poolNode].Devices[1].SharingMode = v1alpha1.SharingTimeSlicing
			},
			want: []guard.Reason{guard.ReasonDeviceSharingForbidden}, field: "status.allocation.devices.results[0]"},
		{name: "claim of no tenant, lookup fails", ns: plainNS, now: allocatedClaim(plainNS, allocResult(plainNode, draDev)),
			setup: func(c *fakeCluster, _ *fakeDevices) { c.err = errBoom },
			want:  []guard.Reason{guard.ReasonLookupFailed}, field: "metadata.namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, d := draWorld()
			if tc.policy != nil {
				p := draPolicy()
				tc.policy(&p)
				c.identities[tenantNS] = acmeIdentity(p)
			}
			if tc.setup != nil {
				tc.setup(c, d)
			}
			ns := tc.ns
			if ns == "" {
				ns = tenantNS
			}
			old := tc.old
			if old == nil {
				old = newClaim(ns, tc.now.Spec)
			}
			var cl Cluster = c
			if tc.failNS != "" {
				cl = identityFailing{c, tc.failNS}
			}
			v := claimsValidator(t, cl, d)
			resp := post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "status", admissionv1.Update, ns, tc.now, old))
			wantCodes(t, resp, tc.want...)
			if tc.field != "" {
				if f := causeFields(resp); len(f) == 0 || f[0] != tc.field {
					t.Fatalf("fields = %v, want the first %s", f, tc.field)
				}
			}
		})
	}
}

// The evaluator judges the one device allocated, narrowed from the node's
// evidence, and as the claim's configuration shares it.
func TestAllocationEvaluatesNarrowedDevice(t *testing.T) {
	c, d := draWorld()
	ev := &recordingEvaluator{real: localEvaluator(t)}
	v, err := New(Config{PoolLabel: pool, Cluster: c, Devices: d, Evaluator: ev, Profile: guard.ProfileProduction})
	if err != nil {
		t.Fatal(err)
	}
	now := withConfig(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), mpsSharing)
	resp := post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "status", admissionv1.Update, tenantNS, now, newClaim(tenantNS, now.Spec)))
	wantCodes(t, resp)
	if len(ev.reqs) != 1 {
		t.Fatalf("%d evaluations, want 1", len(ev.reqs))
	}
	req := ev.reqs[0]
	if req.Tenant == nil || req.Tenant.ID != "acme" || req.Policy == nil || req.Policy.Name != "acme-policy" {
		t.Fatalf("tenant %+v, policy %+v", req.Tenant, req.Policy)
	}
	if len(req.Nodes) != 1 {
		t.Fatalf("%d nodes, want 1", len(req.Nodes))
	}
	n := req.Nodes[0]
	if n.Name != poolNode || n.UID != "uid-"+poolNode || n.Pool != "acme" {
		t.Fatalf("node %s uid %s pool %s", n.Name, n.UID, n.Pool)
	}
	if n.State == nil || len(n.State.Devices) != 1 {
		t.Fatalf("state %+v, want one device", n.State)
	}
	if got := n.State.Devices[0]; got.ID != "GPU-0" || got.SharingMode != v1alpha1.SharingMPS {
		t.Fatalf("device %s shared %s, want GPU-0 shared MPS", got.ID, got.SharingMode)
	}
	if len(c.states[poolNode].Devices) < 2 || c.states[poolNode].Devices[0].SharingMode != v1alpha1.SharingExclusive {
		t.Fatal("narrowing changed the cluster's evidence")
	}
}

// A device the evaluator refuses without a reason still is refused.
func TestAllocationEvaluatorFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp *wire.EvaluateResponse
		want guard.Reason
	}{
		{name: "no result", resp: &wire.EvaluateResponse{}, want: guard.ReasonEvaluatorError},
		{name: "two results", resp: &wire.EvaluateResponse{Results: []wire.NodeResult{{Decision: guard.DecisionAllow}, {Decision: guard.DecisionAllow}}},
			want: guard.ReasonEvaluatorError},
		{name: "deny without reasons", resp: &wire.EvaluateResponse{Results: []wire.NodeResult{{Decision: guard.DecisionDeny}}},
			want: guard.ReasonEvaluatorError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, d := draWorld()
			v, err := New(Config{PoolLabel: pool, Cluster: c, Devices: d, Evaluator: fixedEvaluator{tc.resp}})
			if err != nil {
				t.Fatal(err)
			}
			now := allocatedClaim(tenantNS, allocResult(poolNode, draDev))
			wantCodes(t, post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "status", admissionv1.Update, tenantNS, now, newClaim(tenantNS, now.Spec))),
				tc.want)
		})
	}
}

type recordingEvaluator struct {
	real Evaluator
	reqs []*wire.EvaluateRequest
}

func (r *recordingEvaluator) Evaluate(req *wire.EvaluateRequest) *wire.EvaluateResponse {
	r.reqs = append(r.reqs, req)
	return r.real.Evaluate(req)
}

type fixedEvaluator struct{ resp *wire.EvaluateResponse }

func (f fixedEvaluator) Evaluate(*wire.EvaluateRequest) *wire.EvaluateResponse { return f.resp }

// --- the endpoint ---

func TestClaimsEndpointRequests(t *testing.T) {
	good := newClaim(tenantNS, claimSpec([]resourcev1.DeviceRequest{exact(draClass)}))
	allocated := allocatedClaim(tenantNS, allocResult(poolNode, draDev))
	cases := []struct {
		name string
		// req builds the request; Group is resource.k8s.io unless group
		// says otherwise.
		resource, sub string
		op            admissionv1.Operation
		group         *string
		obj, old      runtime.Object
		// devices is the Devices of the Config: draWorld's, unsynced,
		// or none.
		devices string
		// clusterUnsynced leaves the cluster's caches unfilled.
		clusterUnsynced bool
		want            []guard.Reason
	}{
		{name: "claim CREATE", resource: "resourceclaims", op: admissionv1.Create, obj: good},
		{name: "allocation", resource: "resourceclaims", sub: "status", op: admissionv1.Update, obj: allocated, old: good},
		{name: "core group", resource: "resourceclaims", op: admissionv1.Create, group: draPtr(""), obj: good,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "another group", resource: "resourceclaims", op: admissionv1.Create, group: draPtr("resource.example.com"), obj: good,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "pods", resource: "pods", op: admissionv1.Create, group: draPtr(""), obj: makePod(tenantNS).obj(),
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "another resource of the group", resource: "deviceclasses", op: admissionv1.Create, obj: good,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "resourceslices", resource: "resourceslices", op: admissionv1.Create, obj: good,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "status of a template", resource: "resourceclaimtemplates", sub: "status", op: admissionv1.Update, obj: good, old: good,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "another subresource of claims", resource: "resourceclaims", sub: "binding", op: admissionv1.Update, obj: good, old: good,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "claim DELETE", resource: "resourceclaims", op: admissionv1.Delete, old: good,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "claim CONNECT", resource: "resourceclaims", op: admissionv1.Connect, obj: good,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "claim without object", resource: "resourceclaims", op: admissionv1.Create,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "claim that is a template", resource: "resourceclaims", op: admissionv1.Create, obj: newClaimTemplate(tenantNS, good.Spec),
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "template that is a claim", resource: "resourceclaimtemplates", op: admissionv1.Create, obj: good,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "status without old object", resource: "resourceclaims", sub: "status", op: admissionv1.Update, obj: allocated,
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "claim CREATE without Devices", resource: "resourceclaims", op: admissionv1.Create, obj: good, devices: "none",
			want: []guard.Reason{guard.ReasonLookupFailed}},
		{name: "template CREATE without Devices", resource: "resourceclaimtemplates", op: admissionv1.Create,
			obj: newClaimTemplate(tenantNS, good.Spec), devices: "none", want: []guard.Reason{guard.ReasonLookupFailed}},
		{name: "allocation without Devices", resource: "resourceclaims", sub: "status", op: admissionv1.Update, obj: allocated, old: good,
			devices: "none", want: []guard.Reason{guard.ReasonLookupFailed}},
		{name: "claim CREATE before Devices synced", resource: "resourceclaims", op: admissionv1.Create, obj: good, devices: "unsynced",
			want: []guard.Reason{guard.ReasonLookupFailed}},
		{name: "allocation before Devices synced", resource: "resourceclaims", sub: "status", op: admissionv1.Update, obj: allocated, old: good,
			devices: "unsynced", want: []guard.Reason{guard.ReasonLookupFailed}},
		{name: "allocation before the cluster synced", resource: "resourceclaims", sub: "status", op: admissionv1.Update, obj: allocated, old: good,
			clusterUnsynced: true, want: []guard.Reason{guard.ReasonLookupFailed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, d := draWorld()
			c.synced = !tc.clusterUnsynced
			cfg := Config{PoolLabel: pool, Cluster: c, Evaluator: localEvaluator(t)}
			switch tc.devices {
			case "":
				cfg.Devices = d
			case "unsynced":
				d.unsynced = true
				cfg.Devices = d
			case "none":
				// Config.Devices stays a nil interface.
			}
			v, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			req := claimRequest(t, tc.resource, tc.sub, tc.op, tenantNS, tc.obj, tc.old)
			if tc.group != nil {
				req.Resource.Group = *tc.group
			}
			wantCodes(t, post(t, v.ClaimsHandler(), req), tc.want...)
		})
	}
}

// G-DEVICE-CLAIMS a claim the claims webhook never saw (its namespace
// lacks the tenant label) or made before the policy narrowed is held to
// the policy when it is allocated.
func TestAllocationJudgesTheClaimSpec(t *testing.T) {
	c, d := draWorld()
	v := claimsValidator(t, c, d)
	claim := allocatedClaim(tenantNS, allocResult(poolNode, draDev))
	claim.Spec = claimSpec([]resourcev1.DeviceRequest{exact("gpu.amd.com")})
	resp := post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "status", admissionv1.Update, tenantNS, claim, newClaim(tenantNS, claim.Spec)))
	wantCodes(t, resp, guard.ReasonDeviceClassNotAllowed)
	if f := causeFields(resp); len(f) == 0 || f[0] != "spec.devices.requests[0].exactly.deviceClassName" {
		t.Errorf("fields %v", f)
	}
}

// A CC-mode device is never shared: not with a second pod of its claim,
// nor with another claim of the same tenant. And every configuration that
// applies is judged: a driver may apply another than the last.
func TestAllocationSharingHoles(t *testing.T) {
	c, d := draWorld()
	v := claimsValidator(t, c, d)
	post1 := func(claim *resourcev1.ResourceClaim) *admissionv1.AdmissionResponse {
		return post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "status", admissionv1.Update, tenantNS, claim, newClaim(tenantNS, claim.Spec)))
	}
	two := reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDevCC)), podConsumer("a"), podConsumer("b"))
	wantCodes(t, post1(two), guard.ReasonDeviceSharingForbidden)
	one := reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDevCC)), podConsumer("a"))
	wantCodes(t, post1(one))
	d.hold(poolNode, draDevCC, draSameNS, "same-tenant", "s-uid")
	wantCodes(t, post1(one), guard.ReasonDeviceSharingForbidden)

	// The class shares by MPS, which the policy forbids; the claim's own
	// configuration, later, says TimeSlicing for every request.
	c2, d2 := draWorld()
	c2.identities[tenantNS] = acmeIdentity(func() v1alpha1.PlacementPolicySpec {
		p := draPolicy()
		p.GPUSharing = &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingMPS}}
		return p
	}())
	v2 := claimsValidator(t, c2, d2)
	claim := allocatedClaim(tenantNS, allocResult(poolNode, draDev))
	a := claim.Status.Allocation
	for _, cfg := range []struct {
		source resourcev1.AllocationConfigSource
		params string
	}{
		{resourcev1.AllocationConfigSourceClass, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`},
		{resourcev1.AllocationConfigSourceClaim, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"TimeSlicing"}}`},
	} {
		a.Devices.Config = append(a.Devices.Config, resourcev1.DeviceAllocationConfiguration{Source: cfg.source,
			DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
				Driver: "gpu.nvidia.com", Parameters: runtime.RawExtension{Raw: []byte(cfg.params)}}}})
	}
	resp := post(t, v2.ClaimsHandler(), claimRequest(t, "resourceclaims", "status", admissionv1.Update, tenantNS, claim, newClaim(tenantNS, claim.Spec)))
	if !slices.Contains(codes(resp), string(guard.ReasonDeviceSharingForbidden)) {
		t.Errorf("a class configuration sharing by MPS under a policy forbidding it: %v, want DEVICE_SHARING_FORBIDDEN", codes(resp))
	}
}

// G-DEVICE-ALLOCATION a binder may not bind a pod to a node other than the
// one the devices of its claims are on: the kubelet there would prepare a
// device of the same name that nothing judged.
func TestBindingKeepsClaimsOnTheirNode(t *testing.T) {
	c, d := draWorld()
	v, err := New(Config{PoolLabel: pool, Cluster: c, Devices: d, Evaluator: localEvaluator(t), Profile: guard.ProfileProduction, Binders: []string{volcano}})
	if err != nil {
		t.Fatal(err)
	}
	bind := func(node string) *admissionv1.AdmissionResponse {
		return post(t, v.BindingsHandler(), request(t, "pods", "binding", admissionv1.Create, tenantNS, volcano, binding(tenantNS, node), nil))
	}
	// One device in the evidence, so that the node is not MIXED_POOL.
	c.states[poolNode].Devices = c.states[poolNode].Devices[:1]
	// The pod p's claim holds a device of poolNode.
	claim := reserved(allocatedClaim(tenantNS, allocResult(poolNode, draDev)), podConsumer("p"))
	d.reserved = append(d.reserved, claim)
	wantCodes(t, bind(poolNode))
	wantCodes(t, bind(sharedGPU), guard.ReasonDeviceNotOnNode)
	// A device no slice publishes any more refuses the binding too.
	d.reserved[0] = reserved(allocatedClaim(tenantNS, allocResult(poolNode, "gpu-nowhere")), podConsumer("p"))
	wantCodes(t, bind(poolNode), guard.ReasonDeviceUnknown)
	// Another pod's claim does not matter.
	d.reserved[0] = reserved(allocatedClaim(tenantNS, allocResult(sharedGPU, draDev)), podConsumer("other"))
	wantCodes(t, bind(poolNode))
}

// G-DEVICE-CLAIMS without device enforcement a tenant's pod may not use
// claims: nothing would judge the devices they hand out.
func TestPodClaimsNeedDeviceEnforcement(t *testing.T) {
	name := "gpu"
	p := makePod(tenantNS).mod(func(s *corev1.PodSpec) {
		s.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}}
	}).obj()
	off := newValidator(t, newFakeCluster(), &fakeEvaluator{verdict: allowVerdict()})
	resp := post(t, off.PodsHandler(), request(t, "pods", "", admissionv1.Create, tenantNS, "alice", p, nil))
	if !slices.Contains(codes(resp), string(guard.ReasonDeviceEnforcementOff)) {
		t.Errorf("a tenant pod with claims, devices off: %v, want DEVICE_ENFORCEMENT_OFF", codes(resp))
	}
	c, d := draWorld()
	on := claimsValidator(t, c, d)
	resp = post(t, on.PodsHandler(), request(t, "pods", "", admissionv1.Create, tenantNS, "alice", p, nil))
	if slices.Contains(codes(resp), string(guard.ReasonDeviceEnforcementOff)) {
		t.Errorf("a tenant pod with claims, devices on: %v", codes(resp))
	}
	// A pod of no tenant is not concerned.
	plain := makePod(plainNS).mod(func(s *corev1.PodSpec) {
		s.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}}
	}).obj()
	wantCodes(t, post(t, off.PodsHandler(), request(t, "pods", "", admissionv1.Create, plainNS, "alice", plain, nil)))
}

// G-DEVICE-ALLOCATION a pod that takes GPUs only through claims is bound
// to a node whose DRA devices are in several modes: each device it is
// given is judged where it is allocated, so the node is judged without
// them. A pod that also asks for a GPU resource, or has no claims, is
// judged on every device of the node, and the binding refused MIXED_POOL.
func TestBindingOfAPodOfClaims(t *testing.T) {
	c, d := draWorld()
	v, err := New(Config{PoolLabel: pool, Cluster: c, Devices: d, Evaluator: localEvaluator(t), Profile: guard.ProfileProduction, Binders: []string{volcano}})
	if err != nil {
		t.Fatal(err)
	}
	bind := func() *admissionv1.AdmissionResponse {
		return post(t, v.BindingsHandler(), request(t, "pods", "binding", admissionv1.Create, tenantNS, volcano, binding(tenantNS, poolNode), nil))
	}
	name := "gpu"
	claims := func(s *corev1.PodSpec) {
		s.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}}
	}
	gpuResource := func(s *corev1.PodSpec) {
		s.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	}
	// Every device of the node is a DRA device, the time-sliced one too.
	for i := range c.states[poolNode].Devices {
		if d := &c.states[poolNode].Devices[i]; d.DRA == nil {
			d.DRA = &v1alpha1.DRADeviceRef{Driver: draDriver, Pool: poolNode, Device: "gpu-ts"}
		}
	}
	if c.pods == nil {
		c.pods = map[string]*corev1.Pod{}
	}
	c.pods[tenantNS+"/p"] = makePod(tenantNS).mod(claims).obj()
	wantCodes(t, bind())
	c.pods[tenantNS+"/p"] = makePod(tenantNS).mod(claims).mod(gpuResource).obj()
	wantCodes(t, bind(), guard.ReasonMixedPool)
	c.pods[tenantNS+"/p"] = makePod(tenantNS).obj()
	wantCodes(t, bind(), guard.ReasonMixedPool)
}
