package evidence

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func gpus(n int, d v1alpha1.GPUDevice) []v1alpha1.GPUDevice { return replicate(d, n) }

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestFromLabels(t *testing.T) {
	h100 := "NVIDIA-H100-80GB-HBM3"
	cases := []struct {
		name   string
		labels map[string]string
		lab    bool
		want   Facts
	}{
		{name: "no labels", want: Facts{Source: v1alpha1.SourceNFD, Complete: true}},
		{name: "exclusive GPUs in CC mode on an SGX host", labels: map[string]string{
			LabelGPUCount: "2", LabelGPUProduct: h100, LabelSharingStrategy: "none", LabelMIGStrategy: "none",
			LabelCCMode: "on", LabelCCModeState: "on", LabelTEESGX: "true"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true,
				Devices: gpus(2, v1alpha1.GPUDevice{Vendor: "nvidia", Model: h100, SharingMode: v1alpha1.SharingExclusive, CCMode: v1alpha1.CCModeOn}),
				TEE:     &v1alpha1.TEEFacts{Type: v1alpha1.TEESGX}}},
		{name: "a host that can launch SEV-SNP or TDX guests is no TEE of its own", labels: map[string]string{
			"feature.node.kubernetes.io/cpu-security.sev.snp.enabled": "true", "feature.node.kubernetes.io/cpu-security.tdx.enabled": "true"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true}},
		{name: "time-slicing", labels: map[string]string{LabelGPUCount: "1", LabelGPUProduct: h100, LabelSharingStrategy: "time-slicing"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true,
				Devices: gpus(1, v1alpha1.GPUDevice{Vendor: "nvidia", Model: h100, SharingMode: v1alpha1.SharingTimeSlicing})}},
		{name: "single MIG strategy", labels: map[string]string{LabelGPUCount: "7", LabelGPUProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
			LabelMIGStrategy: "single", LabelSharingStrategy: "none"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true,
				Devices: gpus(7, v1alpha1.GPUDevice{Vendor: "nvidia", Model: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", MIG: true,
					SharingMode: v1alpha1.SharingExclusive, MIGProfile: "1g.5gb"})}},
		{name: "time-sliced MIG slices are MIG and time-sliced", labels: map[string]string{LabelGPUCount: "7",
			LabelGPUProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED", LabelMIGStrategy: "single", LabelSharingStrategy: "time-slicing"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true,
				Devices: gpus(7, v1alpha1.GPUDevice{Vendor: "nvidia", Model: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED", MIG: true,
					SharingMode: v1alpha1.SharingTimeSlicing, MIGProfile: "1g.5gb"})}},
		{name: "mixed MIG strategy with MPS", labels: map[string]string{LabelGPUCount: "2", LabelMIGStrategy: "mixed", LabelSharingStrategy: "mps"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true,
				Devices: gpus(2, v1alpha1.GPUDevice{Vendor: "nvidia", MIG: true, SharingMode: v1alpha1.SharingMPS})}},
		{name: "MIG without a sharing strategy leaves the sharing unknown", labels: map[string]string{LabelGPUCount: "7",
			LabelGPUProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", LabelMIGStrategy: "single"},
			want: Facts{Source: v1alpha1.SourceNFD,
				Devices: gpus(7, v1alpha1.GPUDevice{Vendor: "nvidia", Model: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", MIG: true, MIGProfile: "1g.5gb"})}},
		{name: "single MIG strategy without a profile in the product", labels: map[string]string{LabelGPUCount: "1",
			LabelGPUProduct: h100, LabelMIGStrategy: "single", LabelSharingStrategy: "none"},
			want: Facts{Source: v1alpha1.SourceNFD,
				Devices: gpus(1, v1alpha1.GPUDevice{Vendor: "nvidia", Model: h100, MIG: true, SharingMode: v1alpha1.SharingExclusive})}},
		{name: "unknown MIG strategy", labels: map[string]string{LabelGPUCount: "1", LabelMIGStrategy: "dynamic", LabelSharingStrategy: "none"},
			want: Facts{Source: v1alpha1.SourceNFD,
				Devices: gpus(1, v1alpha1.GPUDevice{Vendor: "nvidia", SharingMode: v1alpha1.SharingExclusive})}},
		{name: "CC mode not yet applied", labels: map[string]string{LabelGPUCount: "1", LabelSharingStrategy: "none", LabelCCMode: "on", LabelCCModeState: "off"},
			want: Facts{Source: v1alpha1.SourceNFD,
				Devices: gpus(1, v1alpha1.GPUDevice{Vendor: "nvidia", SharingMode: v1alpha1.SharingExclusive})}},
		{name: "unknown sharing strategy", labels: map[string]string{LabelGPUCount: "1", LabelSharingStrategy: "magic"},
			want: Facts{Source: v1alpha1.SourceNFD, Devices: gpus(1, v1alpha1.GPUDevice{Vendor: "nvidia"})}},
		{name: "product without count", labels: map[string]string{LabelGPUProduct: h100},
			want: Facts{Source: v1alpha1.SourceNFD}},
		{name: "SGX next to a TDX host is SGX", labels: map[string]string{LabelTEESGX: "true",
			"feature.node.kubernetes.io/cpu-security.tdx.enabled": "true"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true, TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESGX}}},
		{name: "SGX not enabled", labels: map[string]string{LabelTEESGX: "false"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true}},
		{name: "SGX with its EPC size", labels: map[string]string{LabelTEESGX: "true", LabelSGXEPC: "68719476736"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true, TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESGX, EPCSize: quantity("64Gi")}}},
		{name: "a malformed EPC size is no size", labels: map[string]string{LabelTEESGX: "true", LabelSGXEPC: "64Gi"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true, TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESGX}}},
		{name: "a zero EPC size is no size", labels: map[string]string{LabelTEESGX: "true", LabelSGXEPC: "0"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true, TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESGX}}},
		{name: "an EPC size without SGX is nothing", labels: map[string]string{LabelSGXEPC: "68719476736"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true}},
		{name: "mock labels ignored outside lab", labels: map[string]string{guard.LabelMockSharingMode: "MIG"},
			want: Facts{Source: v1alpha1.SourceNFD, Complete: true}},
		{name: "mock in lab", lab: true, labels: map[string]string{
			LabelGPUCount: "8", LabelSharingStrategy: "none",
			guard.LabelMockGPUCount: "1", guard.LabelMockSharingMode: "TimeSlicing", guard.LabelMockCCMode: "Off",
			guard.LabelMockTEEType: "TDX", guard.LabelMockAttestation: "Passed"},
			want: Facts{Source: v1alpha1.SourceMock, Complete: true,
				Devices: gpus(1, v1alpha1.GPUDevice{Vendor: "mock", SharingMode: v1alpha1.SharingTimeSlicing, CCMode: v1alpha1.CCModeOff}),
				TEE:     &v1alpha1.TEEFacts{Type: v1alpha1.TEETDX, Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, Verifier: "mock"}}}},
		{name: "bad mock value", lab: true, labels: map[string]string{guard.LabelMockGPUCount: "1", guard.LabelMockSharingMode: "shared"},
			want: Facts{Source: v1alpha1.SourceMock, Devices: gpus(1, v1alpha1.GPUDevice{Vendor: "mock"})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FromLabels(tc.labels, tc.lab)); diff != "" {
				t.Errorf("FromLabels (-want +got):\n%s", diff)
			}
		})
	}
}
