package guard

// Node labels that describe simulated evidence in lab clusters. The observe
// controller reads them only when it runs in lab mode, and then publishes
// the node's evidence with source mock, which the production profile never
// accepts. Each starts with MockLabelPrefix.
const (
	// LabelMockGPUCount is the number of GPUs, a decimal integer.
	LabelMockGPUCount = MockLabelPrefix + "gpu-count"
	// LabelMockGPUModel is the GPU model, e.g. NVIDIA-H100-80GB-HBM3.
	LabelMockGPUModel = MockLabelPrefix + "gpu-model"
	// LabelMockSharingMode is the sharing mode of every GPU: Exclusive, MIG,
	// MPS or TimeSlicing.
	LabelMockSharingMode = MockLabelPrefix + "sharing-mode"
	// LabelMockMIGProfile is the MIG profile, e.g. 1g.10gb; only with MIG.
	LabelMockMIGProfile = MockLabelPrefix + "mig-profile"
	// LabelMockCCMode is the GPUs' confidential-computing mode: On, Off or
	// DevTools.
	LabelMockCCMode = MockLabelPrefix + "cc-mode"
	// LabelMockTEEType is the node's TEE: SEV-SNP, TDX or SGX.
	LabelMockTEEType = MockLabelPrefix + "tee-type"
	// LabelMockAttestation is a simulated attestation verdict: Passed or
	// Failed. Label values cannot hold a measurement, so none is simulated.
	LabelMockAttestation = MockLabelPrefix + "attestation"
)

// The devices of a Dynamic Resource Allocation driver that a lab node's
// mock evidence names.
const (
	// LabelMockDRADriver names a DRA driver (e.g. gpu.example.com): the
	// node's mock evidence names each GPU the driver publishes for the node
	// in its ResourceSlices, by the uuid and model the slice states, in the
	// node's sharing and CC modes.
	LabelMockDRADriver = MockLabelPrefix + "dra-driver"
	// AnnotationMockDRADevices, on a node that names a driver, lists the
	// devices the evidence names, comma separated, each as name or
	// name=SharingMode (e.g. gpu-0=Exclusive,gpu-1=TimeSlicing); a device
	// of the slices it does not list has no evidence. Without it, every
	// device of the driver is named.
	AnnotationMockDRADevices = MockLabelPrefix + "dra-devices"
)
