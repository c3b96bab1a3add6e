package evidence

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Node feature labels read as nfd evidence.
const (
	LabelGPUCount        = "nvidia.com/gpu.count"
	LabelGPUProduct      = "nvidia.com/gpu.product"
	LabelSharingStrategy = "nvidia.com/gpu.sharing-strategy"
	LabelMIGStrategy     = "nvidia.com/mig.strategy"
	LabelCCMode          = "nvidia.com/cc.mode"
	LabelCCModeState     = "nvidia.com/cc.mode.state"
	// LabelTEESGX says the node can run SGX enclaves, which its pods can
	// use; it is the only NFD TEE label read as a TEE of the node. NFD's
	// cpu-security.sev.snp.enabled and cpu-security.tdx.enabled say the
	// host can launch confidential VMs, not that the node runs inside one,
	// so they prove nothing about the pods' memory and are not read.
	LabelTEESGX = "feature.node.kubernetes.io/cpu-security.sgx.enabled"
	// LabelSGXEPC is the size of the node's SGX enclave page cache in
	// bytes, as NFD reads it from the CPU; read as the SGX TEE's epcSize.
	LabelSGXEPC = "feature.node.kubernetes.io/cpu-security.sgx.epc"
)

// maxDevices is the most devices a NodeSecurityState may list.
const maxDevices = 64

// Facts is the evidence read from a node's labels, without the node's
// identity and the time.
type Facts struct {
	// Source is nfd or mock.
	Source v1alpha1.EvidenceSource
	// Complete is false when a label is malformed, contradicts another or
	// leaves a fact it announces undetermined.
	Complete bool
	// Devices are the node's GPUs, all with the same facts: labels describe
	// a node, not a device.
	Devices []v1alpha1.GPUDevice
	// TEE is the node's TEE, nil when the labels name none.
	TEE *v1alpha1.TEEFacts
}

// FromLabels reads a node's evidence from its labels. In lab mode, a node
// with any guard.xila.us/mock-* label is described by those labels alone,
// as source mock; otherwise the feature labels are read as source nfd and
// mock labels are ignored.
func FromLabels(labels map[string]string, lab bool) Facts {
	if lab && hasMockLabel(labels) {
		return fromMockLabels(labels)
	}
	return fromFeatureLabels(labels)
}

func hasMockLabel(labels map[string]string) bool {
	for k := range labels {
		if strings.HasPrefix(k, guard.MockLabelPrefix) {
			return true
		}
	}
	return false
}

// fromFeatureLabels reads NFD and GPU operator labels.
func fromFeatureLabels(l map[string]string) Facts {
	f := Facts{Source: v1alpha1.SourceNFD, Complete: true}
	count, ok := gpuCount(l[LabelGPUCount], l[LabelGPUProduct] != "")
	f.Complete = f.Complete && ok
	if count > 0 {
		d := v1alpha1.GPUDevice{Vendor: "nvidia", Model: l[LabelGPUProduct]}
		var migOK, sharingOK bool
		d.MIG, d.MIGProfile, migOK = nvidiaMIG(l[LabelMIGStrategy], d.Model)
		d.SharingMode, sharingOK = nvidiaSharing(l[LabelSharingStrategy])
		f.Complete = f.Complete && migOK && sharingOK
		d.CCMode, ok = nvidiaCCMode(l[LabelCCMode], l[LabelCCModeState])
		f.Complete = f.Complete && ok
		f.Devices = replicate(d, count)
	}
	if l[LabelTEESGX] == "true" {
		f.TEE = &v1alpha1.TEEFacts{Type: v1alpha1.TEESGX, EPCSize: sgxEPC(l[LabelSGXEPC])}
	}
	return f
}

// sgxEPC parses NFD's EPC size, a positive number of bytes. A missing or
// malformed size is no size: it is not judged by any policy, only
// advertised as the node's sgx.intel.com/epc capacity, so the evidence
// stays complete without it.
func sgxEPC(v string) *resource.Quantity {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return nil
	}
	return resource.NewQuantity(n, resource.BinarySI)
}

// gpuCount parses the GPU count. A product without a count, a malformed
// count or one beyond what a NodeSecurityState holds is incomplete.
func gpuCount(v string, product bool) (int, bool) {
	if v == "" {
		return 0, !product
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 0:
		return 0, false
	case n > maxDevices:
		return maxDevices, false
	}
	return n, true
}

// nvidiaMIG maps the GPU operator's MIG strategy: whether the devices are
// MIG slices, and their profile. With the single strategy, every device is
// a slice of the same profile, which the product label names after
// -MIG-; with mixed, the profiles may differ and are not read.
func nvidiaMIG(strategy, product string) (mig bool, profile string, ok bool) {
	switch strategy {
	case "", "none":
		return false, "", true
	case "single":
		i := strings.LastIndex(product, "-MIG-")
		if i < 0 {
			return true, "", false
		}
		// The device plugin appends -SHARED to the product of shared
		// devices; it is not part of the profile.
		return true, strings.TrimSuffix(product[i+len("-MIG-"):], "-SHARED"), true
	case "mixed":
		return true, "", true
	}
	return false, "", false
}

// nvidiaSharing maps the GPU operator's sharing strategy, which says how
// each device is shared, a MIG slice as much as a whole GPU. Without it
// the sharing is unknown.
func nvidiaSharing(strategy string) (v1alpha1.GPUSharingMode, bool) {
	switch strategy {
	case "none":
		return v1alpha1.SharingExclusive, true
	case "time-slicing":
		return v1alpha1.SharingTimeSlicing, true
	case "mps":
		return v1alpha1.SharingMPS, true
	}
	return "", false
}

// nvidiaCCMode maps the GPU operator's CC mode labels. cc.mode is what was
// asked for; cc.mode.state says whether it took effect, either as
// "success" or by naming the mode in force. Until both agree the mode is
// unknown. Without any CC label the mode is unknown but the evidence is not
// incomplete: the evaluator decides whether the policy needs it.
func nvidiaCCMode(mode, state string) (v1alpha1.GPUCCMode, bool) {
	if mode == "" && state == "" {
		return "", true
	}
	m, ok := map[string]v1alpha1.GPUCCMode{"on": v1alpha1.CCModeOn, "off": v1alpha1.CCModeOff, "devtools": v1alpha1.CCModeDevTools}[strings.ToLower(mode)]
	if !ok || (state != "success" && !strings.EqualFold(state, mode)) {
		return "", false
	}
	return m, true
}

// replicate returns n copies of d with the indices as IDs.
func replicate(d v1alpha1.GPUDevice, n int) []v1alpha1.GPUDevice {
	out := make([]v1alpha1.GPUDevice, n)
	for i := range out {
		out[i] = d
		out[i].ID = strconv.Itoa(i)
	}
	return out
}
