package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// NodeSecurityState is the security evidence of one node, named after the
// node. Only the platform's evidence publisher writes it; the evaluator
// judges it against a tenant's PlacementPolicy.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nss,categories=xila-guard
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.status.evaluation.tenantId`
// +kubebuilder:printcolumn:name="Decision",type=string,JSONPath=`.status.evaluation.decision`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source`
// +kubebuilder:printcolumn:name="Complete",type=boolean,JSONPath=`.spec.complete`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Observed",type=date,JSONPath=`.spec.observedAt`
// +kubebuilder:printcolumn:name="Incarnation",type=string,JSONPath=`.spec.incarnation`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeSecurityState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the evidence, as published.
	// +required
	Spec NodeSecurityStateSpec `json:"spec"`

	// status is the platform's judgement of the evidence.
	// +optional
	Status NodeSecurityStateStatus `json:"status,omitempty"`
}

// NodeSecurityStateSpec is a node's security evidence at one moment.
type NodeSecurityStateSpec struct {
	// nodeUID is the UID of the Node object the evidence describes. Evidence
	// whose nodeUID differs from the node's is not used
	// (EVIDENCE_NODE_MISMATCH): it belongs to an earlier node of that name.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	NodeUID types.UID `json:"nodeUID"`

	// incarnation is an opaque token that changes whenever the node is
	// re-provisioned or rebooted, or the evidence source restarts. The
	// scheduler refuses to bind when it changed since the node was judged.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Incarnation string `json:"incarnation"`

	// observedAt is when the publisher last confirmed the evidence. The
	// publisher refreshes it periodically, so a silent publisher shows up as
	// stale evidence (EVIDENCE_STALE).
	// +kubebuilder:validation:Format=date-time
	// +required
	ObservedAt metav1.Time `json:"observedAt"`

	// source says where the evidence came from: attested, nfd or mock.
	// +required
	Source EvidenceSource `json:"source"`

	// complete is true when the publisher could determine every fact it
	// reports on. Incomplete evidence is indeterminate (EVIDENCE_INCOMPLETE).
	// +required
	Complete bool `json:"complete"`

	// devices are the node's GPUs, or its MIG slices. Devices that disagree
	// on MIG, sharing mode, MIG profile or CC mode make the node
	// indeterminate (MIXED_POOL): the evaluator cannot know which device a
	// pod will get. When the node offers pods more GPUs than the devices
	// account for, or a policy's GPU rules find no device to judge, the
	// evidence is incomplete (EVIDENCE_INCOMPLETE).
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Devices []GPUDevice `json:"devices,omitempty"`

	// tee describes the trusted execution environment the node runs in;
	// absent when it runs in none.
	// +optional
	TEE *TEEFacts `json:"tee,omitempty"`
}

// GPUDevice is what the evidence says about one GPU. Whether the device is
// MIG-partitioned (mig) and how it, or each of its MIG slices, is shared
// (sharingMode) are separate facts, and the evaluator judges both: a
// time-sliced MIG slice is still time-sliced.
// +kubebuilder:validation:XValidation:rule="!has(self.migProfile) || (has(self.mig) && self.mig) || (has(self.sharingMode) && self.sharingMode == 'MIG')",message="migProfile needs mig: true (or sharingMode: MIG)"
type GPUDevice struct {
	// id identifies the device on the node: its UUID, or its index when the
	// source knows no UUID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	ID string `json:"id"`

	// vendor of the device, e.g. nvidia.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Vendor string `json:"vendor,omitempty"`

	// model of the device, e.g. NVIDIA-H100-80GB-HBM3.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Model string `json:"model,omitempty"`

	// mig is true when the device is partitioned into MIG instances; the
	// device then stands for one MIG slice, and sharingMode says how each
	// slice is shared (Exclusive, MPS or TimeSlicing).
	// +optional
	MIG bool `json:"mig,omitempty"`

	// sharingMode is how the device, or each of its MIG slices, is shared.
	// Empty when unknown, which makes evidence incomplete for a policy that
	// restricts sharing. MIG is kept from before the mig field and means
	// MIG slices that are each given to one container, the same as mig:
	// true with Exclusive.
	// +optional
	SharingMode GPUSharingMode `json:"sharingMode,omitempty"`

	// migProfile is the MIG partition profile, e.g. 1g.10gb; only on a
	// MIG-partitioned device.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	MIGProfile string `json:"migProfile,omitempty"`

	// parentID is the id of the GPU a MIG slice is cut from; only on a
	// MIG-partitioned device.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	ParentID string `json:"parentID,omitempty"`

	// dra names the device as a Dynamic Resource Allocation driver
	// publishes it in a ResourceSlice. A device allocated through DRA is
	// judged by the evidence device that names it here, and by nothing
	// else: a DRA device no evidence names is indeterminate
	// (DEVICE_EVIDENCE_MISSING).
	// +optional
	DRA *DRADeviceRef `json:"dra,omitempty"`

	// ccMode is the device's confidential-computing mode. Empty when
	// unknown, which makes evidence incomplete for a policy that requires a
	// mode.
	// +optional
	CCMode GPUCCMode `json:"ccMode,omitempty"`
}

// DRADeviceRef names a device of a ResourceSlice the way an allocation
// result does: the driver, the pool within the driver and the device
// within the pool.
type DRADeviceRef struct {
	// driver is the DRA driver's name, e.g. gpu.nvidia.com.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Driver string `json:"driver"`

	// pool is the driver's resource pool, usually the node's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Pool string `json:"pool"`

	// device is the device's name within the pool, e.g. gpu-0.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Device string `json:"device"`
}

// TEEFacts is what the evidence says about the node's TEE. Evidence whose
// source is attested takes every fact from a report or quote that the
// attestation controller verified; the hardware facts (host data, TCB,
// chip ID) are left out by publishers that cannot authenticate them.
//
// +kubebuilder:validation:XValidation:rule="!has(self.hostData) || (self.type == 'SEV-SNP' && size(self.hostData) == 64) || (self.type == 'TDX' && size(self.hostData) == 96)",message="hostData is 32 bytes (64 hex digits) of SEV-SNP HOST_DATA or 48 bytes (96 hex digits) of TDX MRCONFIGID"
// +kubebuilder:validation:XValidation:rule="!has(self.snpTCB) || self.type == 'SEV-SNP'",message="snpTCB is only for SEV-SNP"
// +kubebuilder:validation:XValidation:rule="!has(self.tdxTCBSVN) || self.type == 'TDX'",message="tdxTCBSVN is only for TDX"
// +kubebuilder:validation:XValidation:rule="!has(self.chipID) || self.type == 'SEV-SNP'",message="chipID is only for SEV-SNP"
type TEEFacts struct {
	// type of the TEE.
	// +required
	Type TEEType `json:"type"`

	// measurement is the TEE's launch measurement: SEV-SNP MEASUREMENT or
	// TDX MRTD.
	// +optional
	Measurement Measurement `json:"measurement,omitempty"`

	// hostData is what the host bound to the TEE at launch besides the
	// measurement, in lowercase hex: SEV-SNP HOST_DATA (32 bytes) or TDX
	// MRCONFIGID (48 bytes).
	// +kubebuilder:validation:MaxLength=96
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{64}|[0-9a-f]{96})$`
	// +optional
	HostData string `json:"hostData,omitempty"`

	// snpTCB is the SEV-SNP platform TCB the report states (REPORTED_TCB):
	// the security patch level of each firmware component.
	// +optional
	SNPTCB *SNPTCB `json:"snpTCB,omitempty"`

	// tdxTCBSVN is the TDX platform TCB the quote states (TEE_TCB_SVN, 16
	// bytes), in lowercase hex.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{32}$`
	// +optional
	TDXTCBSVN string `json:"tdxTCBSVN,omitempty"`

	// chipID is the SEV-SNP CHIP_ID (64 bytes) in lowercase hex: the
	// processor the node's evidence is bound to. The attestation controller
	// records the chip of the first evidence it verifies for a node UID and
	// refuses evidence from another chip for that UID (CHIP_ID_CHANGED).
	// Absent when the host masks the chip ID.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{128}$`
	// +optional
	ChipID string `json:"chipID,omitempty"`

	// epcSize is the size of the SGX enclave page cache the node offers
	// enclaves, in bytes (the unit of sgx.intel.com/epc). It is a platform
	// fact that no report signs: attested evidence carries what the node's
	// attester states beside its verified report, NFD-sourced evidence
	// what NFD read from the CPU. The TEE resource plugin advertises it as
	// the node's sgx.intel.com/epc capacity.
	// +optional
	EPCSize *resource.Quantity `json:"epcSize,omitempty"`

	// attestation is the latest remote attestation verdict, if any.
	// +optional
	Attestation *Attestation `json:"attestation,omitempty"`
}

// SNPTCB is an SEV-SNP TCB_VERSION: one security patch level per firmware
// component, each 0 to 255.
type SNPTCB struct {
	// bootLoader is the AMD-SP boot loader's security patch level.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +required
	BootLoader int32 `json:"bootLoader"`

	// tee is the AMD-SP operating system's security patch level.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +required
	TEE int32 `json:"tee"`

	// snp is the SNP firmware's security patch level.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +required
	SNP int32 `json:"snp"`

	// microcode is the CPU microcode's security patch level.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +required
	Microcode int32 `json:"microcode"`
}

// Attestation is a remote attestation verdict about the node's TEE.
// +kubebuilder:validation:XValidation:rule="self.verdict == 'Failed' || !has(self.reason)",message="reason is only for a Failed verdict"
type Attestation struct {
	// verdict of the attestation.
	// +required
	Verdict AttestationVerdict `json:"verdict"`

	// verifiedAt is when the verifier reached the verdict.
	// +kubebuilder:validation:Format=date-time
	// +required
	VerifiedAt metav1.Time `json:"verifiedAt"`

	// verifier names the attestation service, for audit.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Verifier string `json:"verifier,omitempty"`

	// reason is the attestation reason code of the check that failed, on a
	// Failed verdict, e.g. MEASUREMENT_NOT_ALLOWED.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Z]+(_[A-Z]+)*$`
	// +optional
	Reason guard.Reason `json:"reason,omitempty"`

	// message says what the verifier found, for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// rootOfTrust is the root the evidence's signature chains to: amd,
	// intel, or lab for the lab's software TEE. Absent when the signature
	// did not verify.
	// +optional
	RootOfTrust RootOfTrust `json:"rootOfTrust,omitempty"`
}

// RootOfTrust names the kind of root a verified report or quote chains to.
// +kubebuilder:validation:Enum=amd;intel;lab
type RootOfTrust string

const (
	// RootAMD is one of AMD's SEV-SNP roots (ARK).
	RootAMD RootOfTrust = "amd"
	// RootIntel is Intel's SGX root CA, which TDX quotes chain to.
	RootIntel RootOfTrust = "intel"
	// RootLab is the lab's software SEV-SNP root; only the lab profile
	// trusts it.
	RootLab RootOfTrust = "lab"
)

// RootsOfTrust lists every root of trust.
var RootsOfTrust = []RootOfTrust{RootAMD, RootIntel, RootLab}

// NodeSecurityStateStatus is the platform's judgement of a node's evidence.
type NodeSecurityStateStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the evidence; Ready is True while it is fresh
	// and complete.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// evaluation is the latest judgement of the node against the policy of
	// the tenant whose pool it is in; absent when the node is in no pool
	// or no single TenantBinding owns its pool. It is a report for people:
	// no decision reads it.
	// +optional
	Evaluation *NodeEvaluation `json:"evaluation,omitempty"`
}

// NodeEvaluation is one judgement of a node against its pool's policy.
type NodeEvaluation struct {
	// tenantId is the tenant whose pool the node is in.
	// +kubebuilder:validation:MaxLength=63
	// +required
	TenantID string `json:"tenantId"`

	// policyName is the PlacementPolicy the node was judged against.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PolicyName string `json:"policyName,omitempty"`

	// decision is the evaluator's decision: allow, deny or indeterminate.
	// +kubebuilder:validation:Enum=allow;deny;indeterminate
	// +required
	Decision guard.Decision `json:"decision"`

	// reasons are the evaluator's reason codes.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Type=string
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	Reasons []guard.Reason `json:"reasons,omitempty"`

	// incarnation is the evidence incarnation that was judged.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Incarnation string `json:"incarnation,omitempty"`

	// evaluatedAt is when the evaluator first reached this judgement (the
	// fields above). Re-evaluations that reach the same one leave it alone,
	// so that the status is written only when the judgement changes.
	// +kubebuilder:validation:Format=date-time
	// +required
	EvaluatedAt metav1.Time `json:"evaluatedAt"`
}

// NodeSecurityStateList is a list of NodeSecurityState.
// +kubebuilder:object:root=true
type NodeSecurityStateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the states.
	Items []NodeSecurityState `json:"items"`
}

// BoundEvidence is the record of this evidence a pod bound against it
// carries (guard.AnnotationBoundEvidence): the node's UID and the
// evidence's incarnation.
func (s *NodeSecurityStateSpec) BoundEvidence() string {
	return guard.BoundEvidence(string(s.NodeUID), s.Incarnation)
}
