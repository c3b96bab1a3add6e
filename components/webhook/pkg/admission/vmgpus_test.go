package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/guard"
)

// fakeGPUSettings is the GPU controller's GPUSettings; missing when spec
// is nil.
type fakeGPUSettings struct{ spec *gpuv1alpha1.GPUSettingsSpec }

func (f *fakeGPUSettings) GPUSettings() (*gpuv1alpha1.GPUSettingsSpec, bool) {
	return f.spec, f.spec != nil
}

// launcher is a pod of tenantNS a VirtualMachineInstance of that UID
// controls, as KubeVirt's controller makes it; vmi "" for a pod of none.
func launcher(name, vmi string, controller bool) *corev1.Pod {
	p := makePod(tenantNS).obj()
	p.Name, p.UID = name, types.UID("pod-"+name)
	if vmi != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance",
			Name: "vm-" + vmi, UID: types.UID(vmi), Controller: &controller}}
	}
	return p
}

// G-GPU-PODS a claim of a GPU for VMs (a DeviceClass a GPUClass sells) is
// reserved only for the launcher pod of a VMI holding a GPUDevice of it,
// whoever writes the reservation.
func TestAllocationOfAGPUForVMs(t *testing.T) {
	const otherClass = "other.example.com"
	settings := &gpuv1alpha1.GPUSettingsSpec{
		DeviceClasses: []string{draClass, otherClass},
		ClaimHolders: []string{gpuv1alpha1.ClaimHolder(tenantNS, "vmi-1", draClass),
			gpuv1alpha1.ClaimHolder(tenantNS, "vmi-2", otherClass), gpuv1alpha1.ClaimHolder("elsewhere", "vmi-4", draClass)},
	}
	pods := []*corev1.Pod{
		launcher("holder", "vmi-1", true),
		launcher("other-class", "vmi-2", true),
		launcher("holds-none", "vmi-3", true),
		launcher("holds-elsewhere", "vmi-4", true),
		launcher("owned-not-controlled", "vmi-1", false),
		launcher("plain", "", false),
	}
	vmClaim := func(consumers ...string) *resourcev1.ResourceClaim {
		c := allocatedClaim(tenantNS, allocResult(poolNode, draDev))
		for _, n := range consumers {
			c = reserved(c, append(c.Status.ReservedFor, podConsumer(n))...)
		}
		return c
	}
	cases := []struct {
		name     string
		old, now *resourcev1.ResourceClaim
		// settings replace the settings; missing removes them.
		settings *gpuv1alpha1.GPUSettingsSpec
		missing  bool
		want     []guard.Reason
		field    string
	}{
		{name: "G-GPU-PODS the launcher of the VMI holding a device of the class", now: vmClaim("holder")},
		{name: "allocated, reserved for nobody yet", now: vmClaim()},
		{name: "G-GPU-PODS a pod under no VMI's control", now: vmClaim("plain"),
			want: []guard.Reason{guard.ReasonGPUResourceForbidden}, field: "status.reservedFor[0]"},
		{name: "a pod the VMI owns but does not control", now: vmClaim("owned-not-controlled"),
			want: []guard.Reason{guard.ReasonGPUResourceForbidden}},
		{name: "the launcher of a VMI holding a device of another class", now: vmClaim("other-class"),
			want: []guard.Reason{guard.ReasonGPUDeviceClassMismatch}},
		{name: "the launcher of a VMI holding no device", now: vmClaim("holds-none"),
			want: []guard.Reason{guard.ReasonGPUDeviceNotHeld}},
		{name: "the launcher of a VMI of that UID holding one in another namespace", now: vmClaim("holds-elsewhere"),
			want: []guard.Reason{guard.ReasonGPUDeviceNotHeld}},
		{name: "the holder's launcher and a pod of no VMI", now: vmClaim("holder", "plain"),
			want: []guard.Reason{guard.ReasonGPUResourceForbidden}, field: "status.reservedFor[1]"},
		{name: "a consumer that is not the pod it names", now: func() *resourcev1.ResourceClaim {
			c := vmClaim("holder")
			c.Status.ReservedFor[0].UID = "pod-recreated"
			return c
		}(), want: []guard.Reason{guard.ReasonLookupFailed}},
		{name: "a firstAvailable subrequest of the class", now: func() *resourcev1.ResourceClaim {
			c := vmClaim("plain")
			c.Spec = claimSpec([]resourcev1.DeviceRequest{firstAvailable("example.com", draClass)})
			c.Status.Allocation.Devices.Results[0].Request = "gpu/sb"
			return c
		}(), want: []guard.Reason{guard.ReasonGPUResourceForbidden}},
		{name: "a firstAvailable subrequest of another class", now: func() *resourcev1.ResourceClaim {
			c := vmClaim("plain")
			c.Spec = claimSpec([]resourcev1.DeviceRequest{firstAvailable(draClass, "example.com")})
			c.Status.Allocation.Devices.Results[0].Request = "gpu/sb"
			return c
		}()},
		{name: "a class that is no GPU for VMs", now: vmClaim("plain"),
			settings: &gpuv1alpha1.GPUSettingsSpec{DeviceClasses: []string{otherClass}}},
		{name: "the settings are missing", now: vmClaim("holder"), missing: true,
			want: []guard.Reason{guard.ReasonLookupFailed}, field: "status.allocation"},
		{name: "a consumer added to the holder's", old: vmClaim("holder"), now: vmClaim("holder", "plain"),
			want: []guard.Reason{guard.ReasonGPUResourceForbidden}, field: "status.reservedFor[1]"},
		{name: "consumers and allocation kept after the VMI let the device go", old: vmClaim("holder"), now: vmClaim("holder"),
			settings: &gpuv1alpha1.GPUSettingsSpec{DeviceClasses: []string{draClass}}},
		{name: "a consumer removed", old: vmClaim("holder", "plain"), now: vmClaim("holder")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, d := draWorld()
			for _, p := range pods {
				c.pods[tenantNS+"/"+p.Name] = p
			}
			s := &fakeGPUSettings{spec: settings}
			switch {
			case tc.missing:
				s.spec = nil
			case tc.settings != nil:
				s.spec = tc.settings
			}
			v, err := New(Config{PoolLabel: pool, Cluster: c, Devices: d, GPUSettings: s, Evaluator: localEvaluator(t), Profile: guard.ProfileProduction})
			if err != nil {
				t.Fatal(err)
			}
			old := tc.old
			if old == nil {
				old = newClaim(tenantNS, tc.now.Spec)
			}
			resp := post(t, v.ClaimsHandler(), claimRequest(t, "resourceclaims", "status", admissionv1.Update, tenantNS, tc.now, old))
			wantCodes(t, resp, tc.want...)
			if tc.field != "" {
				if f := causeFields(resp); len(f) == 0 || f[0] != tc.field {
					t.Errorf("fields %v, want %s first", f, tc.field)
				}
			}
		})
	}
}

func TestRequestClass(t *testing.T) {
	spec := claimSpec([]resourcev1.DeviceRequest{exact("a.example.com"), firstAvailable("b.example.com", "c.example.com")})
	spec.Devices.Requests[1].Name = "alt"
	spec.Devices.Requests = append(spec.Devices.Requests, resourcev1.DeviceRequest{Name: "empty"})
	for request, want := range map[string]string{"gpu": "a.example.com", "alt/sa": "b.example.com", "alt/sb": "c.example.com",
		"alt": "", "alt/sz": "", "gpu/sa": "", "missing": "", "empty": ""} {
		if got := requestClass(&spec, request); got != want {
			t.Errorf("requestClass(%q) = %q, want %q", request, got, want)
		}
	}
}
