package devices

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func strp(s string) *string { return &s }

func str(s string) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{StringValue: strp(s)}
}

func ver(s string) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{VersionValue: strp(s)}
}

func attrs(kv ...any) map[resourcev1.QualifiedName]resourcev1.DeviceAttribute {
	m := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
	for i := 0; i < len(kv); i += 2 {
		m[resourcev1.QualifiedName(kv[i].(string))] = kv[i+1].(resourcev1.DeviceAttribute)
	}
	return m
}

const (
	gpuUUID    = "GPU-11111111-2222-3333-4444-555555555555"
	otherUUID  = "GPU-99999999-8888-7777-6666-555555555555"
	migUUID    = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	h100Driver = "NVIDIA H100 80GB HBM3"
	h100NFD    = "NVIDIA-H100-80GB-HBM3"
)

func TestKeyOfAndString(t *testing.T) {
	r := &resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: NVIDIADriver, Pool: "node-a", Device: "gpu-0"}
	k := KeyOf(r)
	if want := (Key{Driver: NVIDIADriver, Pool: "node-a", Device: "gpu-0"}); k != want {
		t.Fatalf("KeyOf = %+v, want %+v", k, want)
	}
	if got, want := k.String(), "gpu.nvidia.com/node-a/gpu-0"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestFactsOf(t *testing.T) {
	tests := []struct {
		name   string
		driver string
		attrs  map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
		want   Facts
	}{
		{
			name:   "NVIDIA whole GPU, bare names",
			driver: NVIDIADriver,
			attrs: attrs(
				"type", str("gpu"),
				"uuid", str(gpuUUID),
				"productName", str(h100Driver),
				"brand", str("Nvidia"),
				"driverVersion", ver("550.54.15"),
			),
			want: Facts{Type: "gpu", UUID: gpuUUID, Model: h100Driver},
		},
		{
			name:   "NVIDIA MIG slice, bare names",
			driver: NVIDIADriver,
			attrs: attrs(
				"type", str("mig"),
				"uuid", str(migUUID),
				"productName", str(h100Driver),
				"profile", str("1g.10gb"),
				"parentUUID", str(gpuUUID),
			),
			want: Facts{Type: "mig", UUID: migUUID, Model: h100Driver, MIGProfile: "1g.10gb", ParentUUID: gpuUUID},
		},
		{
			name:   "names qualified with the driver's own domain",
			driver: NVIDIADriver,
			attrs: attrs(
				"gpu.nvidia.com/type", str("mig"),
				"gpu.nvidia.com/uuid", str(migUUID),
				"gpu.nvidia.com/productName", str(h100Driver),
				"gpu.nvidia.com/profile", str("2g.20gb"),
				"gpu.nvidia.com/parentUUID", str(gpuUUID),
			),
			want: Facts{Type: "mig", UUID: migUUID, Model: h100Driver, MIGProfile: "2g.20gb", ParentUUID: gpuUUID},
		},
		{
			name:   "names qualified with another domain are not the driver's",
			driver: NVIDIADriver,
			attrs: attrs(
				"gpu.example.com/uuid", str(gpuUUID),
				"resource.kubernetes.io/productName", str(h100Driver),
				"example.com/type", str("gpu"),
			),
			want: Facts{},
		},
		{
			name:   "example driver's model attribute",
			driver: ExampleDriver,
			attrs: attrs(
				"uuid", str("gpu-18db0e85-99e9-c746-8531-ffeb86328b39"),
				"model", str("LATEST-GPU-MODEL"),
				"index", resourcev1.DeviceAttribute{IntValue: new(int64)},
			),
			want: Facts{UUID: "gpu-18db0e85-99e9-c746-8531-ffeb86328b39", Model: "LATEST-GPU-MODEL"},
		},
		{
			name:   "example driver's qualified model attribute",
			driver: ExampleDriver,
			attrs:  attrs("gpu.example.com/model", str("LATEST-GPU-MODEL")),
			want:   Facts{Model: "LATEST-GPU-MODEL"},
		},
		{
			name:   "productName is preferred to model",
			driver: NVIDIADriver,
			attrs:  attrs("model", str("from-model"), "productName", str("from-productName")),
			want:   Facts{Model: "from-productName"},
		},
		{
			name:   "qualified productName is preferred to bare model",
			driver: NVIDIADriver,
			attrs:  attrs("model", str("from-model"), "gpu.nvidia.com/productName", str("from-productName")),
			want:   Facts{Model: "from-productName"},
		},
		{
			name:   "bare name is read before the qualified one",
			driver: NVIDIADriver,
			attrs:  attrs("uuid", str("bare"), "gpu.nvidia.com/uuid", str("qualified")),
			want:   Facts{UUID: "bare"},
		},
		{
			name:   "version attributes are read as strings",
			driver: NVIDIADriver,
			attrs:  attrs("uuid", ver("1.2.3"), "gpu.nvidia.com/profile", ver("4.5.6")),
			want:   Facts{UUID: "1.2.3", MIGProfile: "4.5.6"},
		},
		{
			name:   "int and bool attributes are not read",
			driver: NVIDIADriver,
			attrs: attrs(
				"uuid", resourcev1.DeviceAttribute{IntValue: new(int64)},
				"type", resourcev1.DeviceAttribute{BoolValue: new(bool)},
			),
			want: Facts{},
		},
		{
			name:   "a bare attribute that is not a string falls back to the qualified one",
			driver: NVIDIADriver,
			attrs: attrs(
				"uuid", resourcev1.DeviceAttribute{IntValue: new(int64)},
				"gpu.nvidia.com/uuid", str(gpuUUID),
			),
			want: Facts{UUID: gpuUUID},
		},
		{
			name:   "no attributes",
			driver: NVIDIADriver,
			attrs:  nil,
			want:   Facts{},
		},
		{
			name:   "unrelated attributes only",
			driver: NVIDIADriver,
			attrs:  attrs("architecture", str("Hopper"), "brand", str("Nvidia")),
			want:   Facts{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &resourcev1.Device{Name: "gpu-0", Attributes: tc.attrs}
			if got := FactsOf(tc.driver, d); got != tc.want {
				t.Errorf("FactsOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

var nvKey = Key{Driver: NVIDIADriver, Pool: "node-a", Device: "gpu-0"}

func draRef(k Key) *v1alpha1.DRADeviceRef {
	return &v1alpha1.DRADeviceRef{Driver: k.Driver, Pool: k.Pool, Device: k.Device}
}

func wholeGPU(id string, k Key) v1alpha1.GPUDevice {
	return v1alpha1.GPUDevice{
		ID: id, Vendor: "nvidia", Model: h100NFD,
		SharingMode: v1alpha1.SharingExclusive, CCMode: "on", DRA: draRef(k),
	}
}

func migSlice(id, parent, profile string, k Key) v1alpha1.GPUDevice {
	return v1alpha1.GPUDevice{
		ID: id, Vendor: "nvidia", Model: h100NFD, MIG: true,
		SharingMode: v1alpha1.SharingExclusive, MIGProfile: profile, ParentID: parent, DRA: draRef(k),
	}
}

func stateWith(devs ...v1alpha1.GPUDevice) *v1alpha1.NodeSecurityStateSpec {
	return &v1alpha1.NodeSecurityStateSpec{
		NodeUID: "uid-a", Incarnation: "inc-1", Source: v1alpha1.SourceAttested, Complete: true,
		ObservedAt: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
		Devices:    devs,
		TEE:        &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP, HostData: strings.Repeat("ab", 32)},
	}
}

func TestEvidence(t *testing.T) {
	migKey := Key{Driver: NVIDIADriver, Pool: "node-a", Device: "gpu-0-mig-1g10gb-0"}
	gpuFacts := Facts{Type: "gpu", UUID: gpuUUID, Model: h100Driver}
	migFacts := Facts{Type: "mig", UUID: migUUID, Model: h100Driver, MIGProfile: "1g.10gb", ParentUUID: gpuUUID}

	tests := []struct {
		name       string
		state      *v1alpha1.NodeSecurityStateSpec
		key        Key
		facts      Facts
		wantID     string // matched device's ID; "" when none is returned
		wantReason guard.Reason
		wantMsg    []string // substrings of the message
	}{
		{
			name: "nil state", state: nil, key: nvKey, facts: gpuFacts,
			wantReason: guard.ReasonDeviceEvidenceMissing,
			wantMsg:    []string{"gpu.nvidia.com/node-a/gpu-0", "no evidence"},
		},
		{
			name: "state without devices", state: stateWith(), key: nvKey, facts: gpuFacts,
			wantReason: guard.ReasonDeviceEvidenceMissing,
			wantMsg:    []string{"names no device gpu.nvidia.com/node-a/gpu-0"},
		},
		{
			name:  "devices without a DRA name",
			state: stateWith(v1alpha1.GPUDevice{ID: gpuUUID, Model: h100NFD, SharingMode: v1alpha1.SharingExclusive}),
			key:   nvKey, facts: gpuFacts,
			wantReason: guard.ReasonDeviceEvidenceMissing,
		},
		{
			name:  "same device name in another pool",
			state: stateWith(wholeGPU(gpuUUID, Key{Driver: NVIDIADriver, Pool: "node-b", Device: "gpu-0"})),
			key:   nvKey, facts: gpuFacts,
			wantReason: guard.ReasonDeviceEvidenceMissing,
		},
		{
			name:  "same device name and pool of another driver",
			state: stateWith(wholeGPU(gpuUUID, Key{Driver: ExampleDriver, Pool: "node-a", Device: "gpu-0"})),
			key:   nvKey, facts: gpuFacts,
			wantReason: guard.ReasonDeviceEvidenceMissing,
		},
		{
			name:  "G-DEVICE-SLICES another device of the same pool",
			state: stateWith(wholeGPU(gpuUUID, Key{Driver: NVIDIADriver, Pool: "node-a", Device: "gpu-1"})),
			key:   nvKey, facts: gpuFacts,
			wantReason: guard.ReasonDeviceEvidenceMissing,
		},
		{
			name:       "G-DEVICE-SLICES two evidence devices name the key",
			state:      stateWith(wholeGPU(gpuUUID, nvKey), wholeGPU(otherUUID, nvKey)),
			key:        nvKey,
			facts:      gpuFacts,
			wantReason: guard.ReasonDeviceEvidenceMismatch,
			wantMsg:    []string{"twice", gpuUUID, otherUUID},
		},
		{
			name:       "two evidence devices name the key, even when the slice says nothing",
			state:      stateWith(wholeGPU(gpuUUID, nvKey), wholeGPU(gpuUUID+"-dup", nvKey)),
			key:        nvKey,
			facts:      Facts{},
			wantReason: guard.ReasonDeviceEvidenceMismatch,
		},
		{
			name:   "whole GPU agrees",
			state:  stateWith(wholeGPU(otherUUID, Key{Driver: NVIDIADriver, Pool: "node-a", Device: "gpu-1"}), wholeGPU(gpuUUID, nvKey)),
			key:    nvKey,
			facts:  gpuFacts,
			wantID: gpuUUID,
		},
		{
			name:   "slice that states nothing is not contradicted",
			state:  stateWith(wholeGPU(gpuUUID, nvKey)),
			key:    nvKey,
			facts:  Facts{},
			wantID: gpuUUID,
		},
		{
			name:       "G-DEVICE-SLICES uuid differs",
			state:      stateWith(wholeGPU(gpuUUID, nvKey)),
			key:        nvKey,
			facts:      Facts{Type: "gpu", UUID: otherUUID, Model: h100Driver},
			wantReason: guard.ReasonDeviceEvidenceMismatch,
			wantMsg:    []string{"disagrees", `uuid "` + otherUUID + `", evidence "` + gpuUUID + `"`},
		},
		{
			name:       "uuid differs only in case",
			state:      stateWith(wholeGPU(gpuUUID, nvKey)),
			key:        nvKey,
			facts:      Facts{UUID: strings.ToLower(gpuUUID)},
			wantReason: guard.ReasonDeviceEvidenceMismatch,
		},
		{
			name:       "model differs",
			state:      stateWith(wholeGPU(gpuUUID, nvKey)),
			key:        nvKey,
			facts:      Facts{Type: "gpu", UUID: gpuUUID, Model: "NVIDIA A100-SXM4-80GB"},
			wantReason: guard.ReasonDeviceEvidenceMismatch,
			wantMsg:    []string{`model "NVIDIA A100-SXM4-80GB", evidence "` + h100NFD + `"`},
		},
		{
			name:       "slice states a model, evidence has none",
			state:      stateWith(func() v1alpha1.GPUDevice { d := wholeGPU(gpuUUID, nvKey); d.Model = ""; return d }()),
			key:        nvKey,
			facts:      Facts{Model: h100Driver},
			wantReason: guard.ReasonDeviceEvidenceMismatch,
		},
		{
			name:   "model spelled with spaces against hyphens",
			state:  stateWith(wholeGPU(gpuUUID, nvKey)),
			key:    nvKey,
			facts:  Facts{Model: "NVIDIA H100 80GB HBM3"},
			wantID: gpuUUID,
		},
		{
			name:   "model spelled with underscores, other case and padding",
			state:  stateWith(wholeGPU(gpuUUID, nvKey)),
			key:    nvKey,
			facts:  Facts{Model: "  nvidia_h100_80gb_hbm3 "},
			wantID: gpuUUID,
		},
		{
			name:   "MIG slice agrees",
			state:  stateWith(wholeGPU(gpuUUID, nvKey), migSlice(migUUID, gpuUUID, "1g.10gb", migKey)),
			key:    migKey,
			facts:  migFacts,
			wantID: migUUID,
		},
		{
			name: "MIG slice agrees with evidence written with sharingMode MIG",
			state: stateWith(v1alpha1.GPUDevice{
				ID: migUUID, Model: h100NFD, SharingMode: v1alpha1.SharingMIG,
				MIGProfile: "1g.10gb", ParentID: gpuUUID, DRA: draRef(migKey),
			}),
			key:    migKey,
			facts:  migFacts,
			wantID: migUUID,
		},
		{
			name:       "MIG profile differs",
			state:      stateWith(migSlice(migUUID, gpuUUID, "3g.40gb", migKey)),
			key:        migKey,
			facts:      migFacts,
			wantReason: guard.ReasonDeviceEvidenceMismatch,
			wantMsg:    []string{`MIG profile "1g.10gb", evidence "3g.40gb"`},
		},
		{
			name:       "MIG parent differs",
			state:      stateWith(migSlice(migUUID, otherUUID, "1g.10gb", migKey)),
			key:        migKey,
			facts:      migFacts,
			wantReason: guard.ReasonDeviceEvidenceMismatch,
			wantMsg:    []string{`MIG parent "` + gpuUUID + `", evidence "` + otherUUID + `"`},
		},
		{
			name:       "slice says mig, evidence is a whole GPU",
			state:      stateWith(wholeGPU(gpuUUID, nvKey)),
			key:        nvKey,
			facts:      Facts{Type: "mig", UUID: gpuUUID},
			wantReason: guard.ReasonDeviceEvidenceMismatch,
			wantMsg:    []string{"type mig, evidence of a whole GPU"},
		},
		{
			name:       "slice says gpu, evidence is a MIG slice",
			state:      stateWith(migSlice(migUUID, gpuUUID, "1g.10gb", migKey)),
			key:        migKey,
			facts:      Facts{Type: "gpu", UUID: migUUID},
			wantReason: guard.ReasonDeviceEvidenceMismatch,
			wantMsg:    []string{"type gpu, evidence of a MIG slice"},
		},
		{
			name: "slice says gpu, evidence is a MIG slice by sharingMode MIG",
			state: stateWith(v1alpha1.GPUDevice{
				ID: migUUID, Model: h100NFD, SharingMode: v1alpha1.SharingMIG, DRA: draRef(migKey),
			}),
			key:        migKey,
			facts:      Facts{Type: "gpu"},
			wantReason: guard.ReasonDeviceEvidenceMismatch,
			wantMsg:    []string{"type gpu, evidence of a MIG slice"},
		},
		{
			name:       "every difference is reported",
			state:      stateWith(wholeGPU(otherUUID, nvKey)),
			key:        nvKey,
			facts:      Facts{Type: "mig", UUID: migUUID, Model: "Other", MIGProfile: "1g.10gb", ParentUUID: gpuUUID},
			wantReason: guard.ReasonDeviceEvidenceMismatch,
			wantMsg:    []string{"uuid", "model", "MIG profile", "MIG parent", "type mig"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dev, reason, msg := Evidence(tc.state, tc.key, tc.facts)
			if reason != tc.wantReason {
				t.Errorf("reason = %q, want %q (message %q)", reason, tc.wantReason, msg)
			}
			if tc.wantID == "" {
				if dev != nil {
					t.Errorf("device = %+v, want nil", *dev)
				}
				if msg == "" {
					t.Errorf("empty message with reason %q", reason)
				}
			} else {
				if dev == nil {
					t.Fatalf("device = nil, want %s (reason %q, message %q)", tc.wantID, reason, msg)
				}
				if dev.ID != tc.wantID {
					t.Errorf("device ID = %q, want %q", dev.ID, tc.wantID)
				}
				if msg != "" {
					t.Errorf("message = %q, want empty", msg)
				}
				// The device returned is the evidence's own, not a copy.
				found := false
				for i := range tc.state.Devices {
					if &tc.state.Devices[i] == dev {
						found = true
					}
				}
				if !found {
					t.Errorf("returned device does not point into state.Devices")
				}
			}
			for _, s := range tc.wantMsg {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not contain %q", msg, s)
				}
			}
		})
	}
}

func TestSameModel(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{h100Driver, h100NFD, true},
		{h100NFD, h100NFD, true},
		{"nvidia h100 80gb hbm3", h100NFD, true},
		{"NVIDIA_H100_80GB_HBM3", h100Driver, true},
		{" NVIDIA H100 80GB HBM3\t", h100NFD, true},
		{"NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", false},
		{"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", false},
		{"NVIDIA H100", "", false},
	}
	for _, tc := range tests {
		if got := sameModel(tc.a, tc.b); got != tc.want {
			t.Errorf("sameModel(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := sameModel(tc.b, tc.a); got != tc.want {
			t.Errorf("sameModel(%q, %q) = %v, want %v (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

// deepCopy copies a state through its generated DeepCopy, so that a
// comparison afterwards sees any change made through shared pointers.
func deepCopy(s *v1alpha1.NodeSecurityStateSpec) *v1alpha1.NodeSecurityStateSpec {
	return s.DeepCopy()
}

func TestNarrow(t *testing.T) {
	other := wholeGPU(otherUUID, Key{Driver: NVIDIADriver, Pool: "node-a", Device: "gpu-1"})
	other.SharingMode = v1alpha1.SharingTimeSlicing
	excl := wholeGPU(gpuUUID, nvKey)
	mps := wholeGPU(gpuUUID, nvKey)
	mps.SharingMode = v1alpha1.SharingMPS
	legacyMIG := v1alpha1.GPUDevice{
		ID: migUUID, Model: h100NFD, SharingMode: v1alpha1.SharingMIG,
		MIGProfile: "1g.10gb", ParentID: gpuUUID, DRA: draRef(nvKey),
	}
	newMIG := migSlice(migUUID, gpuUUID, "1g.10gb", nvKey)
	unknown := wholeGPU(gpuUUID, nvKey)
	unknown.SharingMode = ""

	tests := []struct {
		name     string
		dev      v1alpha1.GPUDevice
		mode     v1alpha1.GPUSharingMode
		wantMode v1alpha1.GPUSharingMode
		wantMIG  bool
	}{
		{"no mode keeps Exclusive", excl, "", v1alpha1.SharingExclusive, false},
		{"no mode keeps MPS", mps, "", v1alpha1.SharingMPS, false},
		{"no mode keeps unknown", unknown, "", "", false},
		{"no mode keeps legacy MIG", legacyMIG, "", v1alpha1.SharingMIG, false},
		{"TimeSlicing overrides Exclusive", excl, v1alpha1.SharingTimeSlicing, v1alpha1.SharingTimeSlicing, false},
		{"MPS overrides Exclusive", excl, v1alpha1.SharingMPS, v1alpha1.SharingMPS, false},
		{"TimeSlicing overrides MPS", mps, v1alpha1.SharingTimeSlicing, v1alpha1.SharingTimeSlicing, false},
		{"TimeSlicing overrides unknown", unknown, v1alpha1.SharingTimeSlicing, v1alpha1.SharingTimeSlicing, false},
		{"TimeSlicing on legacy MIG keeps it a MIG slice", legacyMIG, v1alpha1.SharingTimeSlicing, v1alpha1.SharingTimeSlicing, true},
		{"MPS on legacy MIG keeps it a MIG slice", legacyMIG, v1alpha1.SharingMPS, v1alpha1.SharingMPS, true},
		{"TimeSlicing on mig: true keeps mig", newMIG, v1alpha1.SharingTimeSlicing, v1alpha1.SharingTimeSlicing, true},
		{"Exclusive is not an override", mps, v1alpha1.SharingExclusive, v1alpha1.SharingMPS, false},
		{"MIG is not an override", excl, v1alpha1.SharingMIG, v1alpha1.SharingExclusive, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := stateWith(other, tc.dev)
			before := deepCopy(state)
			dev := &state.Devices[1]

			got := Narrow(state, dev, tc.mode)

			if got == state {
				t.Fatal("Narrow returned its input")
			}
			if len(got.Devices) != 1 {
				t.Fatalf("len(Devices) = %d, want 1: %+v", len(got.Devices), got.Devices)
			}
			d := got.Devices[0]
			if d.ID != tc.dev.ID {
				t.Errorf("device ID = %q, want %q", d.ID, tc.dev.ID)
			}
			if d.SharingMode != tc.wantMode {
				t.Errorf("sharingMode = %q, want %q", d.SharingMode, tc.wantMode)
			}
			if d.MIG != tc.wantMIG {
				t.Errorf("mig = %v, want %v", d.MIG, tc.wantMIG)
			}
			if d.MIGPartitioned() != tc.dev.MIGPartitioned() {
				t.Errorf("MIGPartitioned = %v, want %v as in the evidence", d.MIGPartitioned(), tc.dev.MIGPartitioned())
			}
			// The device's other facts are kept.
			want := tc.dev
			want.SharingMode, want.MIG = d.SharingMode, d.MIG
			if !reflect.DeepEqual(d, want) {
				t.Errorf("device = %+v, want %+v", d, want)
			}
			// Node-level facts are kept.
			if got.Source != v1alpha1.SourceAttested || !got.ObservedAt.Equal(&before.ObservedAt) ||
				got.NodeUID != "uid-a" || got.Incarnation != "inc-1" || !got.Complete {
				t.Errorf("node facts changed: %+v", got)
			}
			if !reflect.DeepEqual(got.TEE, before.TEE) {
				t.Errorf("TEE = %+v, want %+v", got.TEE, before.TEE)
			}
			// The input is untouched.
			if !reflect.DeepEqual(state, before) {
				t.Errorf("Narrow modified its input:\n got %+v\nwant %+v", state, before)
			}
			// Changing the result does not change the input.
			got.Devices[0].SharingMode = "changed"
			got.Devices[0].ID = "changed"
			if !reflect.DeepEqual(state, before) {
				t.Errorf("the result shares its devices with the input")
			}
		})
	}
}

func TestNarrowDeviceNotInState(t *testing.T) {
	// Narrow takes any device, not only one of the state's.
	state := stateWith(wholeGPU(otherUUID, nvKey))
	before := deepCopy(state)
	dev := wholeGPU(gpuUUID, nvKey)
	got := Narrow(state, &dev, v1alpha1.SharingMPS)
	if len(got.Devices) != 1 || got.Devices[0].ID != gpuUUID || got.Devices[0].SharingMode != v1alpha1.SharingMPS {
		t.Errorf("Devices = %+v", got.Devices)
	}
	if dev.SharingMode != v1alpha1.SharingExclusive {
		t.Errorf("Narrow modified dev: sharingMode %q", dev.SharingMode)
	}
	if !reflect.DeepEqual(state, before) {
		t.Errorf("Narrow modified its input")
	}
}

func TestNarrowNoTEE(t *testing.T) {
	state := stateWith(wholeGPU(gpuUUID, nvKey))
	state.TEE = nil
	state.Source = v1alpha1.SourceNFD
	got := Narrow(state, &state.Devices[0], "")
	if got.TEE != nil {
		t.Errorf("TEE = %+v, want nil", got.TEE)
	}
	if got.Source != v1alpha1.SourceNFD {
		t.Errorf("source = %q, want nfd", got.Source)
	}
}

func TestShared(t *testing.T) {
	tests := []struct {
		mode          v1alpha1.GPUSharingMode
		capacityShare bool
		want          bool
	}{
		{"", false, false},
		{v1alpha1.SharingExclusive, false, false},
		{v1alpha1.SharingMIG, false, false},
		{v1alpha1.SharingTimeSlicing, false, true},
		{v1alpha1.SharingMPS, false, true},
		{"", true, true},
		{v1alpha1.SharingExclusive, true, true},
		{v1alpha1.SharingMIG, true, true},
		{v1alpha1.SharingMPS, true, true},
		{"timeslicing", false, false},
	}
	for _, tc := range tests {
		if got := Shared(tc.mode, tc.capacityShare); got != tc.want {
			t.Errorf("Shared(%q, %v) = %v, want %v", tc.mode, tc.capacityShare, got, tc.want)
		}
	}
}

func TestNodeOf(t *testing.T) {
	tests := []struct {
		name      string
		sliceNode *string
		devNode   *string
		want      string
	}{
		{"device's node wins", strp("slice-node"), strp("dev-node"), "dev-node"},
		{"device's node alone", nil, strp("dev-node"), "dev-node"},
		{"slice's node", strp("slice-node"), nil, "slice-node"},
		{"empty device node falls back to the slice's", strp("slice-node"), strp(""), "slice-node"},
		{"neither", nil, nil, ""},
		{"both empty", strp(""), strp(""), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			slice := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: NVIDIADriver, NodeName: tc.sliceNode}}
			d := &resourcev1.Device{Name: "gpu-0", NodeName: tc.devNode}
			if got := NodeOf(slice, d); got != tc.want {
				t.Errorf("NodeOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNodeOfAllNodes(t *testing.T) {
	allNodes := true
	slice := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: NVIDIADriver, AllNodes: &allNodes}}
	if got := NodeOf(slice, &resourcev1.Device{Name: "gpu-0"}); got != "" {
		t.Errorf("NodeOf = %q, want empty for a slice of all nodes", got)
	}
}

func TestPodClaims(t *testing.T) {
	name := func(s string) *string { return &s }
	pod := &corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
		{Name: "named", ResourceClaimName: name("shared")},
		{Name: "made", ResourceClaimTemplateName: name("one-gpu")},
		{Name: "unneeded", ResourceClaimTemplateName: name("one-gpu")},
	}}, Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{
		{Name: "made", ResourceClaimName: name("train-made-x1")},
		// No claim was needed for this one: nothing to judge.
		{Name: "unneeded"},
	}}}
	got, err := PodClaims(pod)
	if err != nil || !reflect.DeepEqual(got, []string{"shared", "train-made-x1"}) {
		t.Errorf("PodClaims = %v, %v; want [shared train-made-x1]", got, err)
	}
	pod.Status.ResourceClaimStatuses = pod.Status.ResourceClaimStatuses[1:]
	if got, err := PodClaims(pod); err == nil {
		t.Errorf("PodClaims = %v for a template the controller has not handled, want an error", got)
	}
}

func TestFindNewestGenerationOnly(t *testing.T) {
	slice := func(gen int64, devs ...string) *resourcev1.ResourceSlice {
		s := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com",
			Pool: resourcev1.ResourcePool{Name: "n1", Generation: gen, ResourceSliceCount: 1}}}
		for _, d := range devs {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: d})
		}
		return s
	}
	old, cur := slice(1, "gpu-0", "gpu-1"), slice(2, "gpu-1")
	for _, order := range [][]*resourcev1.ResourceSlice{{old, cur}, {cur, old}} {
		if s, d := Find(order, Key{"gpu.example.com", "n1", "gpu-1"}); d == nil || s != cur {
			t.Errorf("gpu-1 found in %v, want the generation 2 slice", s)
		}
		if _, d := Find(order, Key{"gpu.example.com", "n1", "gpu-0"}); d != nil {
			t.Error("gpu-0, which generation 2 dropped, was found")
		}
		if _, d := Find(order, Key{"gpu.nvidia.com", "n1", "gpu-1"}); d != nil {
			t.Error("a device of another driver was found")
		}
	}
}

func TestByClaim(t *testing.T) {
	claims := []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: new(string)}}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	pod := func(claims []corev1.PodResourceClaim, init, main corev1.ResourceRequirements, podLevel *corev1.ResourceRequirements) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: claims, Resources: podLevel,
			InitContainers: []corev1.Container{{Name: "init", Resources: init}},
			Containers:     []corev1.Container{{Name: "main", Resources: main}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"claims, no GPU resource", pod(claims, corev1.ResourceRequirements{}, corev1.ResourceRequirements{Requests: cpu}, nil), true},
		{"no claims", pod(nil, corev1.ResourceRequirements{}, corev1.ResourceRequirements{}, nil), false},
		{"claims and a GPU request", pod(claims, corev1.ResourceRequirements{}, corev1.ResourceRequirements{Requests: gpu}, nil), false},
		{"claims and a GPU limit", pod(claims, corev1.ResourceRequirements{}, corev1.ResourceRequirements{Limits: gpu}, nil), false},
		{"claims and an init container's GPU", pod(claims, corev1.ResourceRequirements{Limits: gpu}, corev1.ResourceRequirements{}, nil), false},
		{"claims and a pod-level GPU request", pod(claims, corev1.ResourceRequirements{}, corev1.ResourceRequirements{}, &corev1.ResourceRequirements{Requests: gpu}), false},
		{"claims and a replica of a shared GPU", pod(claims, corev1.ResourceRequirements{},
			corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu.shared": resource.MustParse("1")}}, nil), false},
		{"claims and a KubeVirt passthrough name", pod(claims, corev1.ResourceRequirements{},
			corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/GH100_H100_SXM5_80GB": resource.MustParse("1")}}, nil), false},
	} {
		if got := ByClaim(tc.pod); got != tc.want {
			t.Errorf("%s: ByClaim = %v, want %v", tc.name, got, tc.want)
		}
	}
}
