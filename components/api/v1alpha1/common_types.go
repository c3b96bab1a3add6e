package v1alpha1

import "time"

// EvidenceSource says where a node's security evidence came from.
// +kubebuilder:validation:Enum=attested;nfd;mock
type EvidenceSource string

const (
	// SourceAttested is evidence backed by a remote attestation service.
	SourceAttested EvidenceSource = "attested"
	// SourceNFD is evidence read from node feature labels (Node Feature
	// Discovery and the GPU operator); the node reports it about itself.
	SourceNFD EvidenceSource = "nfd"
	// SourceMock is simulated evidence for lab clusters. Only the evaluator's
	// lab profile accepts it; it proves integration, never isolation.
	SourceMock EvidenceSource = "mock"
)

// GPUSharingMode says how a GPU is shared between workloads.
// +kubebuilder:validation:Enum=Exclusive;MIG;MPS;TimeSlicing
type GPUSharingMode string

const (
	// SharingExclusive gives the whole GPU to one container.
	SharingExclusive GPUSharingMode = "Exclusive"
	// SharingMIG partitions the GPU into hardware-isolated MIG instances.
	SharingMIG GPUSharingMode = "MIG"
	// SharingMPS shares the GPU between processes through CUDA MPS.
	SharingMPS GPUSharingMode = "MPS"
	// SharingTimeSlicing shares the GPU by time-slicing, with no memory or
	// fault isolation between the workloads.
	SharingTimeSlicing GPUSharingMode = "TimeSlicing"
)

// GPUSharingModes lists every sharing mode.
var GPUSharingModes = []GPUSharingMode{SharingExclusive, SharingMIG, SharingMPS, SharingTimeSlicing}

// GPUCCMode is a GPU's confidential-computing mode.
// +kubebuilder:validation:Enum=On;Off;DevTools
type GPUCCMode string

const (
	// CCModeOn runs the GPU in confidential-computing mode.
	CCModeOn GPUCCMode = "On"
	// CCModeOff runs the GPU without confidential computing.
	CCModeOff GPUCCMode = "Off"
	// CCModeDevTools runs confidential computing with debugging enabled,
	// which weakens its protection; meant for development only.
	CCModeDevTools GPUCCMode = "DevTools"
)

// GPUCCModes lists every GPU CC mode.
var GPUCCModes = []GPUCCMode{CCModeOn, CCModeOff, CCModeDevTools}

// TEEType names a trusted execution environment technology.
// +kubebuilder:validation:Enum=SEV-SNP;TDX;SGX
type TEEType string

const (
	// TEESEVSNP is AMD SEV-SNP.
	TEESEVSNP TEEType = "SEV-SNP"
	// TEETDX is Intel TDX.
	TEETDX TEEType = "TDX"
	// TEESGX is Intel SGX.
	TEESGX TEEType = "SGX"
)

// TEETypes lists every TEE type.
var TEETypes = []TEEType{TEESEVSNP, TEETDX, TEESGX}

// AttestationVerdict is the outcome of a remote attestation.
// +kubebuilder:validation:Enum=Passed;Failed
type AttestationVerdict string

const (
	// AttestationPassed means the verifier accepted the node's quote.
	AttestationPassed AttestationVerdict = "Passed"
	// AttestationFailed means the verifier rejected it.
	AttestationFailed AttestationVerdict = "Failed"
)

// Measurement is a TEE launch measurement written as the hash algorithm,
// a colon and the digest in lowercase hex: sha256:<64 hex> or sha384:<96 hex>.
// +kubebuilder:validation:MaxLength=103
// +kubebuilder:validation:Pattern=`^(sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96})$`
type Measurement string

// Confinement says where a tenant's pods may run.
// +kubebuilder:validation:Enum=Pool;Any
type Confinement string

const (
	// ConfinementPool keeps the tenant's pods on the tenant's own pool.
	ConfinementPool Confinement = "Pool"
	// ConfinementAny also lets them run on nodes that are in no pool; those
	// nodes are not guarded, while pool nodes still are.
	ConfinementAny Confinement = "Any"
)

// PolicyReference names a cluster-scoped PlacementPolicy.
type PolicyReference struct {
	// name of the PlacementPolicy.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// Defaults applied when a policy leaves a field unset. The CRD's defaults
// carry the same values; the evaluator applies them to specs that did not
// pass through the API server.
const (
	// DefaultMaxEvidenceAge bounds the age of a NodeSecurityState.
	DefaultMaxEvidenceAge = 10 * time.Minute
	// DefaultMaxAttestationAge bounds the age of an attestation verdict.
	DefaultMaxAttestationAge = time.Hour
	// MinDuration is the shortest age limit a policy may set.
	MinDuration = time.Second
)

// ConditionReady is the condition type that says whether an object is in
// effect: a TenantBinding whose policy resolves, a PlacementPolicy that the
// evaluator accepts, a NodeSecurityState that is fresh and complete.
const ConditionReady = "Ready"
