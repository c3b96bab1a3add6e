package devices

import (
	"reflect"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func opaque(driver, raw string) *resourcev1.OpaqueDeviceConfiguration {
	return &resourcev1.OpaqueDeviceConfiguration{Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(raw)}}
}

func cfg(driver, raw string, requests ...string) Config {
	return Config{Requests: requests, Opaque: opaque(driver, raw)}
}

const (
	nvGpuTimeSlicing = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`
	nvGpuMPS         = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50}}}`
	nvGpuNoSharing   = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"}`
	nvMigTimeSlicing = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"TimeSlicing"}}`
	nvMigMPS         = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS"}}`
	nvVfio           = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"VfioDeviceConfig"}`
	nvVfioSharing    = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"VfioDeviceConfig","sharing":{"strategy":"TimeSlicing"}}`
	nvCDChannel      = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig","domainID":"abc"}`
	exSpacePart      = `{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"SpacePartitioning","spacePartitioningConfig":{"partitionCount":10}}}`
	exTimeSlicing    = `{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`
)

func TestConfigApplies(t *testing.T) {
	tests := []struct {
		name     string
		requests []string
		request  string
		want     bool
	}{
		{"no requests applies to a request", nil, "req", true},
		{"no requests applies to a subrequest", nil, "req/sub", true},
		{"empty requests applies", []string{}, "anything", true},
		{"named request", []string{"req"}, "req", true},
		{"other request", []string{"req"}, "other", false},
		{"request applies to its subrequests", []string{"req"}, "req/sub", true},
		{"subrequest applies to itself", []string{"req/sub"}, "req/sub", true},
		{"subrequest does not apply to a sibling", []string{"req/sub"}, "req/other", false},
		{"subrequest does not apply to its parent", []string{"req/sub"}, "req", false},
		{"request is not a prefix match", []string{"req"}, "request", false},
		{"request is not a prefix match of a subrequest", []string{"req"}, "request/sub", false},
		{"one of several", []string{"a", "b/x", "req"}, "req/sub", true},
		{"none of several", []string{"a", "b/x"}, "b/y", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Requests: tc.requests}
			if got := c.Applies(tc.request); got != tc.want {
				t.Errorf("Config{Requests: %q}.Applies(%q) = %v, want %v", tc.requests, tc.request, got, tc.want)
			}
		})
	}
}

func TestSharing(t *testing.T) {
	tests := []struct {
		name       string
		configs    []Config
		request    string
		wantMode   v1alpha1.GPUSharingMode
		wantUnread []string
		wantErr    string // substring; "" for no error
	}{
		{name: "no configs", configs: nil, request: "req"},
		{
			name:     "NVIDIA GpuConfig TimeSlicing",
			configs:  []Config{cfg(NVIDIADriver, nvGpuTimeSlicing)},
			request:  "req",
			wantMode: v1alpha1.SharingTimeSlicing,
		},
		{
			name:     "NVIDIA GpuConfig MPS",
			configs:  []Config{cfg(NVIDIADriver, nvGpuMPS)},
			request:  "req",
			wantMode: v1alpha1.SharingMPS,
		},
		{
			name:     "NVIDIA MigDeviceConfig TimeSlicing",
			configs:  []Config{cfg(NVIDIADriver, nvMigTimeSlicing, "req")},
			request:  "req",
			wantMode: v1alpha1.SharingTimeSlicing,
		},
		{
			name:     "NVIDIA MigDeviceConfig MPS",
			configs:  []Config{cfg(NVIDIADriver, nvMigMPS, "req")},
			request:  "req",
			wantMode: v1alpha1.SharingMPS,
		},
		{
			name:     "example driver SpacePartitioning reads as MPS",
			configs:  []Config{cfg(ExampleDriver, exSpacePart)},
			request:  "req",
			wantMode: v1alpha1.SharingMPS,
		},
		{
			name:     "example driver TimeSlicing",
			configs:  []Config{cfg(ExampleDriver, exTimeSlicing)},
			request:  "req",
			wantMode: v1alpha1.SharingTimeSlicing,
		},
		{
			name:    "GpuConfig without sharing",
			configs: []Config{cfg(NVIDIADriver, nvGpuNoSharing)},
			request: "req",
		},
		{
			name:    "GpuConfig with sharing null",
			configs: []Config{cfg(NVIDIADriver, `{"kind":"GpuConfig","sharing":null}`)},
			request: "req",
		},
		{
			name:    "VfioDeviceConfig",
			configs: []Config{cfg(NVIDIADriver, nvVfio)},
			request: "req",
		},
		{
			name:    "VfioDeviceConfig's sharing is not read",
			configs: []Config{cfg(NVIDIADriver, nvVfioSharing)},
			request: "req",
		},
		{
			name:    "ComputeDomainChannelConfig",
			configs: []Config{cfg(NVIDIADriver, nvCDChannel)},
			request: "req",
		},
		{
			name:    "unknown kind of the NVIDIA driver",
			configs: []Config{cfg(NVIDIADriver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"FancyConfig","sharing":{"strategy":"TimeSlicing"}}`)},
			request: "req",
			wantErr: `kind "FancyConfig"`,
		},
		{
			name:    "NVIDIA kind given to the example driver",
			configs: []Config{cfg(ExampleDriver, nvMigMPS)},
			request: "req",
			wantErr: `kind "MigDeviceConfig"`,
		},
		{
			name:    "kind missing",
			configs: []Config{cfg(NVIDIADriver, `{"sharing":{"strategy":"MPS"}}`)},
			request: "req",
			wantErr: `kind ""`,
		},
		{
			name:    "kind in the wrong case",
			configs: []Config{cfg(NVIDIADriver, `{"kind":"gpuconfig","sharing":{"strategy":"MPS"}}`)},
			request: "req",
			wantErr: `kind "gpuconfig"`,
		},
		{
			name:    "unknown strategy",
			configs: []Config{cfg(NVIDIADriver, `{"kind":"GpuConfig","sharing":{"strategy":"Magic"}}`)},
			request: "req",
			wantErr: `strategy "Magic"`,
		},
		{
			name:    "empty strategy",
			configs: []Config{cfg(NVIDIADriver, `{"kind":"GpuConfig","sharing":{}}`)},
			request: "req",
			wantErr: `strategy ""`,
		},
		{
			name:    "strategy in the wrong case",
			configs: []Config{cfg(ExampleDriver, `{"kind":"GpuConfig","sharing":{"strategy":"timeslicing"}}`)},
			request: "req",
			wantErr: `strategy "timeslicing"`,
		},
		{
			name:    "malformed JSON",
			configs: []Config{cfg(NVIDIADriver, `{"kind":"GpuConfig",`)},
			request: "req",
			wantErr: "gpu.nvidia.com configuration is not an object",
		},
		{
			name:    "JSON that is not an object",
			configs: []Config{cfg(NVIDIADriver, `["GpuConfig"]`)},
			request: "req",
			wantErr: "not an object",
		},
		{
			name:    "kind of the wrong type",
			configs: []Config{cfg(NVIDIADriver, `{"kind":7}`)},
			request: "req",
			wantErr: "not an object",
		},
		{
			name:    "no parameters",
			configs: []Config{{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: NVIDIADriver}}},
			request: "req",
			wantErr: "gpu.nvidia.com configuration",
		},
		{
			name:       "unknown driver is unread",
			configs:    []Config{cfg("tpu.example.org", `{"anything":true}`)},
			request:    "req",
			wantUnread: []string{"tpu.example.org"},
		},
		{
			name:       "unknown driver with malformed parameters is unread, not an error",
			configs:    []Config{cfg("tpu.example.org", `not json`)},
			request:    "req",
			wantUnread: []string{"tpu.example.org"},
		},
		{
			name:       "NVIDIA compute domain driver is not read",
			configs:    []Config{cfg("compute-domain.nvidia.com", nvCDChannel)},
			request:    "req",
			wantUnread: []string{"compute-domain.nvidia.com"},
		},
		{
			name:       "unread drivers alongside a read one",
			configs:    []Config{cfg("a.example.org", `{}`), cfg(NVIDIADriver, nvGpuMPS), cfg("b.example.org", `{}`)},
			request:    "req",
			wantMode:   v1alpha1.SharingMPS,
			wantUnread: []string{"a.example.org", "b.example.org"},
		},
		{
			name:       "unread driver of another request is not listed",
			configs:    []Config{cfg("tpu.example.org", `{}`, "other")},
			request:    "req",
			wantUnread: nil,
		},
		{
			name:    "config of another request is ignored",
			configs: []Config{cfg(NVIDIADriver, nvGpuTimeSlicing, "other")},
			request: "req",
		},
		{
			name:    "malformed config of another request is ignored",
			configs: []Config{cfg(NVIDIADriver, `{`, "other")},
			request: "req",
		},
		{
			name:    "config of a sibling subrequest is ignored",
			configs: []Config{cfg(NVIDIADriver, nvGpuMPS, "req/a")},
			request: "req/b",
		},
		{
			name:     "config of the parent request applies to a subrequest",
			configs:  []Config{cfg(NVIDIADriver, nvGpuMPS, "req")},
			request:  "req/b",
			wantMode: v1alpha1.SharingMPS,
		},
		{
			name:     "config of the subrequest applies to it",
			configs:  []Config{cfg(NVIDIADriver, nvGpuTimeSlicing, "req/b")},
			request:  "req/b",
			wantMode: v1alpha1.SharingTimeSlicing,
		},
		{
			name:    "nil opaque is skipped",
			configs: []Config{{Requests: []string{"req"}}},
			request: "req",
		},
		{
			name:     "the later sharing config wins",
			configs:  []Config{cfg(NVIDIADriver, nvGpuTimeSlicing), cfg(NVIDIADriver, nvGpuMPS, "req")},
			request:  "req",
			wantMode: v1alpha1.SharingMPS,
		},
		{
			name:     "the later sharing config wins, other order",
			configs:  []Config{cfg(NVIDIADriver, nvGpuMPS), cfg(NVIDIADriver, nvGpuTimeSlicing, "req")},
			request:  "req",
			wantMode: v1alpha1.SharingTimeSlicing,
		},
		{
			name:     "a later config without sharing keeps the earlier mode",
			configs:  []Config{cfg(NVIDIADriver, nvGpuMPS), cfg(NVIDIADriver, nvGpuNoSharing, "req")},
			request:  "req",
			wantMode: v1alpha1.SharingMPS,
		},
		{
			name:    "an error in any applying config is an error",
			configs: []Config{cfg(NVIDIADriver, nvGpuMPS), cfg(NVIDIADriver, `{"kind":"GpuConfig","sharing":{"strategy":"Magic"}}`)},
			request: "req",
			wantErr: "Magic",
		},
		{
			name: "Parameters given as an Object",
			configs: []Config{{Opaque: &resourcev1.OpaqueDeviceConfiguration{
				Driver: NVIDIADriver,
				Parameters: runtime.RawExtension{Object: &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "resource.nvidia.com/v1beta1",
					"kind":       "GpuConfig",
					"sharing":    map[string]any{"strategy": "MPS"},
				}}},
			}}},
			request:  "req",
			wantMode: v1alpha1.SharingMPS,
		},
		{
			name: "Parameters given as an Object of an unknown kind",
			configs: []Config{{Opaque: &resourcev1.OpaqueDeviceConfiguration{
				Driver: ExampleDriver,
				Parameters: runtime.RawExtension{Object: &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "gpu.resource.example.com/v1alpha1",
					"kind":       "OtherConfig",
				}}},
			}}},
			request: "req",
			wantErr: `kind "OtherConfig"`,
		},
		{
			name: "Raw is read before Object",
			configs: []Config{{Opaque: &resourcev1.OpaqueDeviceConfiguration{
				Driver: NVIDIADriver,
				Parameters: runtime.RawExtension{
					Raw: []byte(nvGpuTimeSlicing),
					Object: &unstructured.Unstructured{Object: map[string]any{
						"apiVersion": "resource.nvidia.com/v1beta1",
						"kind":       "GpuConfig",
						"sharing":    map[string]any{"strategy": "MPS"},
					}},
				},
			}}},
			request:  "req",
			wantMode: v1alpha1.SharingTimeSlicing,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mode, unread, err := Sharing(tc.configs, tc.request)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("err = nil (mode %q), want an error containing %q", mode, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %q, want it to contain %q", err, tc.wantErr)
				}
				if mode != "" {
					t.Errorf("mode = %q with an error, want empty", mode)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if mode != tc.wantMode {
				t.Errorf("mode = %q, want %q", mode, tc.wantMode)
			}
			if !reflect.DeepEqual(unread, tc.wantUnread) {
				t.Errorf("unread = %q, want %q", unread, tc.wantUnread)
			}
		})
	}
}

func TestSharingUnreadBeforeError(t *testing.T) {
	// Drivers already found unread are returned along with the error.
	configs := []Config{cfg("tpu.example.org", `{}`), cfg(NVIDIADriver, `{`), cfg("late.example.org", `{}`)}
	mode, unread, err := Sharing(configs, "req")
	if err == nil {
		t.Fatal("err = nil, want an error")
	}
	if mode != "" {
		t.Errorf("mode = %q, want empty", mode)
	}
	if want := []string{"tpu.example.org"}; !reflect.DeepEqual(unread, want) {
		t.Errorf("unread = %q, want %q", unread, want)
	}
}

func TestClaimConfigs(t *testing.T) {
	o1 := opaque(NVIDIADriver, nvGpuMPS)
	o2 := opaque("tpu.example.org", `{}`)
	spec := &resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{Name: "gpu"}, {Name: "tpu"}},
		Config: []resourcev1.DeviceClaimConfiguration{
			{Requests: []string{"gpu"}, DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: o1}},
			{DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: o2}},
			{Requests: []string{"gpu/a", "tpu"}},
		},
	}}
	got := ClaimConfigs(spec)
	want := []Config{
		{Requests: []string{"gpu"}, Opaque: o1},
		{Requests: nil, Opaque: o2},
		{Requests: []string{"gpu/a", "tpu"}, Opaque: nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ClaimConfigs = %+v, want %+v", got, want)
	}
	if got[0].Opaque != o1 || got[1].Opaque != o2 {
		t.Errorf("ClaimConfigs copied the opaque configurations instead of referring to them")
	}

	mode, unread, err := Sharing(got, "gpu")
	if err != nil || mode != v1alpha1.SharingMPS || !reflect.DeepEqual(unread, []string{"tpu.example.org"}) {
		t.Errorf("Sharing(ClaimConfigs, gpu) = %q, %q, %v; want MPS, [tpu.example.org], nil", mode, unread, err)
	}
	mode, unread, err = Sharing(got, "tpu")
	if err != nil || mode != "" || !reflect.DeepEqual(unread, []string{"tpu.example.org"}) {
		t.Errorf("Sharing(ClaimConfigs, tpu) = %q, %q, %v; want \"\", [tpu.example.org], nil", mode, unread, err)
	}

	if got := ClaimConfigs(&resourcev1.ResourceClaimSpec{}); got == nil || len(got) != 0 {
		t.Errorf("ClaimConfigs(empty) = %#v, want an empty, non-nil slice", got)
	}
}

func TestAllocationConfigs(t *testing.T) {
	class := opaque(NVIDIADriver, nvGpuTimeSlicing)
	claim := opaque(NVIDIADriver, nvGpuMPS)
	a := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: NVIDIADriver, Pool: "node-a", Device: "gpu-0"}},
		Config: []resourcev1.DeviceAllocationConfiguration{
			{Source: resourcev1.AllocationConfigSourceClass, DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: class}},
			{Source: resourcev1.AllocationConfigSourceClaim, Requests: []string{"gpu"}, DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: claim}},
		},
	}}
	got := AllocationConfigs(a)
	want := []Config{{Requests: nil, Opaque: class}, {Requests: []string{"gpu"}, Opaque: claim}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("AllocationConfigs = %+v, want %+v", got, want)
	}
	// The claim's configuration comes after the class's, and wins.
	mode, unread, err := Sharing(got, "gpu")
	if err != nil || mode != v1alpha1.SharingMPS || unread != nil {
		t.Errorf("Sharing(AllocationConfigs, gpu) = %q, %q, %v; want MPS, nil, nil", mode, unread, err)
	}
	// Only the class's applies to another request.
	mode, _, err = Sharing(got, "other")
	if err != nil || mode != v1alpha1.SharingTimeSlicing {
		t.Errorf("Sharing(AllocationConfigs, other) = %q, %v; want TimeSlicing, nil", mode, err)
	}

	if got := AllocationConfigs(&resourcev1.AllocationResult{}); got == nil || len(got) != 0 {
		t.Errorf("AllocationConfigs(empty) = %#v, want an empty, non-nil slice", got)
	}
}

func TestSharingReadsAsTheDriversDo(t *testing.T) {
	cfg := func(driver, params string) []Config {
		return []Config{{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}
	}
	// A field given twice is refused: which one wins differs between
	// decoders.
	if _, _, err := Sharing(cfg(NVIDIADriver, `{"kind":"GpuConfig","sharing":{"strategy":"MPS"},"sharing":null}`), "gpu"); err == nil {
		t.Error("a configuration with sharing twice was read")
	}
	// Names are matched exactly: SHARING is not sharing.
	if m, _, err := Sharing(cfg(NVIDIADriver, `{"kind":"GpuConfig","sharing":{"strategy":"MPS"},"SHARING":null}`), "gpu"); err != nil || m != v1alpha1.SharingMPS {
		t.Errorf("got %q, %v; want MPS", m, err)
	}
	// The example driver time-slices a GPU whose configuration says nothing.
	if m, _, err := Sharing(cfg(ExampleDriver, `{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig"}`), "gpu"); err != nil || m != v1alpha1.SharingTimeSlicing {
		t.Errorf("example GpuConfig without sharing: got %q, %v; want TimeSlicing", m, err)
	}
}

func TestDriverSharing(t *testing.T) {
	cases := []struct {
		name    string
		configs []Config
		driver  string
		request string
		want    v1alpha1.GPUSharingMode
	}{
		{name: "example driver, no configuration: its default time-slices", driver: ExampleDriver, request: "gpu",
			want: v1alpha1.SharingTimeSlicing},
		{name: "example driver, a configuration of another request only: its default", driver: ExampleDriver, request: "gpu",
			configs: []Config{cfg(ExampleDriver, exSpacePart, "other")}, want: v1alpha1.SharingTimeSlicing},
		{name: "example driver, another driver's configuration only: its default", driver: ExampleDriver, request: "gpu",
			configs: []Config{cfg(NVIDIADriver, nvGpuMPS)}, want: v1alpha1.SharingTimeSlicing},
		{name: "example driver, its configuration applies", driver: ExampleDriver, request: "gpu",
			configs: []Config{cfg(ExampleDriver, exSpacePart, "gpu")}, want: v1alpha1.SharingMPS},
		{name: "example driver, its configuration of the parent request applies", driver: ExampleDriver, request: "gpu/first",
			configs: []Config{cfg(ExampleDriver, exSpacePart, "gpu")}, want: v1alpha1.SharingMPS},
		{name: "NVIDIA driver, no configuration: exclusive", driver: NVIDIADriver, request: "gpu"},
		{name: "NVIDIA driver, the example driver's configuration is not its own", driver: NVIDIADriver, request: "gpu",
			configs: []Config{cfg(ExampleDriver, exTimeSlicing)}},
		{name: "NVIDIA driver, its configuration applies", driver: NVIDIADriver, request: "gpu",
			configs: []Config{cfg(NVIDIADriver, nvGpuTimeSlicing)}, want: v1alpha1.SharingTimeSlicing},
		{name: "a driver that is not read: nothing known to share", driver: "tpu.example.org", request: "gpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DriverSharing(tc.configs, tc.driver, tc.request)
			if err != nil || got != tc.want {
				t.Errorf("DriverSharing = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
