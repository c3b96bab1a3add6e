package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PlacementPolicy says what a node must prove before it may host a tenant's
// pods, and where those pods may run at all. A TenantBinding selects the
// policy of its tenant.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gpp,categories=xila-guard
// +kubebuilder:printcolumn:name="Confinement",type=string,JSONPath=`.spec.confinement`
// +kubebuilder:printcolumn:name="Sources",type=string,JSONPath=`.spec.evidence.acceptedSources`
// +kubebuilder:printcolumn:name="Max Age",type=string,JSONPath=`.spec.evidence.maxAge`
// +kubebuilder:printcolumn:name="Bindings",type=integer,JSONPath=`.status.bindings`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PlacementPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the policy requires.
	// +required
	Spec PlacementPolicySpec `json:"spec"`

	// status is what the platform observed about the policy.
	// +optional
	Status PlacementPolicyStatus `json:"status,omitempty"`
}

// PlacementPolicySpec is what a node must prove to host a tenant's pods.
// Every requirement that is left out is not checked; evidence requirements
// always apply.
type PlacementPolicySpec struct {
	// confinement says where the tenant's pods may run. Pool (the default)
	// keeps them on nodes labelled with the tenant's pool. Any also lets
	// them run on nodes that are in no pool, without checking those nodes;
	// pool nodes are still checked, and other tenants' pools stay closed.
	// +kubebuilder:default=Pool
	// +optional
	Confinement Confinement `json:"confinement,omitempty"`

	// evidence says which node evidence is trusted, and for how long.
	// +required
	Evidence EvidencePolicy `json:"evidence"`

	// gpuSharing restricts how the node's GPUs may be shared.
	// +optional
	GPUSharing *GPUSharingPolicy `json:"gpuSharing,omitempty"`

	// confidentialComputing requires a trusted execution environment,
	// confidential GPUs, known launch measurements or a fresh attestation.
	// +optional
	ConfidentialComputing *ConfidentialComputingPolicy `json:"confidentialComputing,omitempty"`

	// podSecurity is the Pod Security Standards level every pod of the
	// tenant must meet: baseline (the default) or restricted. The admission
	// webhook judges it with the Kubernetes pod-security-admission checks
	// at their latest version, and each refusal names the control.
	// +kubebuilder:default=baseline
	// +optional
	PodSecurity PodSecurityLevel `json:"podSecurity,omitempty"`

	// devices says what the tenant's ResourceClaims may ask of Dynamic
	// Resource Allocation. Without it the tenant's claims and claim
	// templates are refused (DEVICE_CLASS_NOT_ALLOWED).
	// +optional
	Devices *DevicePolicy `json:"devices,omitempty"`
}

// DeviceTaintEffect is the effect of a device taint.
type DeviceTaintEffect string

// Device taint effects a policy may ask for.
const (
	// DeviceTaintNoSchedule keeps new allocations off the device.
	DeviceTaintNoSchedule DeviceTaintEffect = "NoSchedule"
	// DeviceTaintNoExecute also evicts the pods that use the device.
	DeviceTaintNoExecute DeviceTaintEffect = "NoExecute"
)

// DevicePolicy bounds a tenant's ResourceClaims and ResourceClaimTemplates.
// The admission webhook judges every request of a claim (exactly and each
// firstAvailable subrequest) at creation, and every allocation of a
// tenant's claim per device when it is written to the claim's status,
// whoever allocates.
type DevicePolicy struct {
	// deviceClasses are the only DeviceClasses the tenant's requests may
	// name.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	DeviceClasses []string `json:"deviceClasses,omitempty"`

	// maxDevicesPerRequest bounds the count of each request; unset, a
	// request may ask for any number of devices.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxDevicesPerRequest *int64 `json:"maxDevicesPerRequest,omitempty"`

	// allowAllocationModeAll lets a request ask for every device that
	// matches it (allocationMode: All).
	// +optional
	AllowAllocationModeAll bool `json:"allowAllocationModeAll,omitempty"`

	// allowCapacityRequests lets a request ask for part of a device's
	// capacity, so that the device is shared through consumable capacity.
	// The device then holds claims of this tenant only.
	// +optional
	AllowCapacityRequests bool `json:"allowCapacityRequests,omitempty"`

	// taintEffect is the effect of the device taint the observe
	// controller puts on a DRA device of the tenant's pool whose evidence
	// the policy does not allow (stale, failing, below a minimum):
	// NoSchedule (the default) keeps new claims off it; NoExecute also
	// evicts the pods that use it.
	// +kubebuilder:validation:Enum=NoSchedule;NoExecute
	// +kubebuilder:default=NoSchedule
	// +optional
	TaintEffect DeviceTaintEffect `json:"taintEffect,omitempty"`

	// opaqueConfigDrivers are drivers whose opaque configuration the
	// tenant's claims may pass. The sharing configuration of the GPU
	// drivers the webhook reads (gpu.nvidia.com, gpu.example.com) is
	// judged against gpuSharing whatever this says; any other driver's
	// opaque configuration is refused unless it is listed here
	// (DEVICE_CONFIG_NOT_ALLOWED).
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	OpaqueConfigDrivers []string `json:"opaqueConfigDrivers,omitempty"`
}

// PodSecurityLevel is a level of the Kubernetes Pod Security Standards.
// +kubebuilder:validation:Enum=baseline;restricted
type PodSecurityLevel string

// Pod Security Standards levels a policy may require.
const (
	PodSecurityBaseline   PodSecurityLevel = "baseline"
	PodSecurityRestricted PodSecurityLevel = "restricted"
)

// EvidencePolicy says which NodeSecurityStates the evaluator may rely on.
type EvidencePolicy struct {
	// acceptedSources lists the evidence sources that are trusted: attested
	// (checked by an attestation service) and nfd (reported by the node's
	// own feature labels). Evidence from any other source makes the decision
	// indeterminate (SOURCE_NOT_ACCEPTED). mock cannot be listed: the
	// evaluator's profile decides about it (lab accepts it as simulated
	// integration, production never does).
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:XValidation:rule="!self.exists(s, s == 'mock')",message="mock cannot be listed: the evaluator's profile decides about mock evidence (lab accepts it, production never does)"
	// +required
	AcceptedSources []EvidenceSource `json:"acceptedSources"`

	// maxAge is the oldest a node's evidence (its observedAt) may be, as a
	// Go duration such as 90s, 10m or 1h30m; at least 1s. Older evidence
	// makes the decision indeterminate (EVIDENCE_STALE). Defaults to 10m.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,4}$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,4}$') || duration(self) >= duration('1s')",message="must be at least 1s"
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// GPUSharingPolicy restricts the sharing modes of a node's GPUs. A device in
// a mode that is not allowed, or that is forbidden, denies the node with the
// mode's reason, e.g. TIME_SLICING_FORBIDDEN.
// +kubebuilder:validation:XValidation:rule="!has(self.allowedModes) || !has(self.forbiddenModes) || !self.allowedModes.exists(m, m in self.forbiddenModes)",message="a sharing mode cannot be both allowed and forbidden"
type GPUSharingPolicy struct {
	// allowedModes, when set, lists the only sharing modes a GPU may be in.
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +optional
	AllowedModes []GPUSharingMode `json:"allowedModes,omitempty"`

	// forbiddenModes lists sharing modes no GPU may be in.
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +optional
	ForbiddenModes []GPUSharingMode `json:"forbiddenModes,omitempty"`
}

// ConfidentialComputingPolicy requires confidential-computing properties of
// the node. Any requirement about the TEE denies a node that has none
// (TEE_MISSING).
// +kubebuilder:validation:XValidation:rule="!has(self.maxAttestationAge) || (has(self.requireAttestation) && self.requireAttestation)",message="maxAttestationAge needs requireAttestation: true"
type ConfidentialComputingPolicy struct {
	// teeTypes, when set, requires the node to run inside a TEE of one of
	// these types (TEE_TYPE_NOT_ALLOWED otherwise).
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	// +optional
	TEETypes []TEEType `json:"teeTypes,omitempty"`

	// gpuCCMode, when set, requires every GPU of the node to be in this
	// confidential-computing mode (CC_MODE_MISMATCH otherwise).
	// +optional
	GPUCCMode GPUCCMode `json:"gpuCCMode,omitempty"`

	// allowedMeasurements, when set, lists the only TEE launch measurements
	// accepted, each sha256:<64 hex> or sha384:<96 hex> in lowercase
	// (MEASUREMENT_NOT_ALLOWED otherwise).
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +optional
	AllowedMeasurements []Measurement `json:"allowedMeasurements,omitempty"`

	// referenceValues, when set, lists the only launch measurements
	// accepted, each with the host data it must come with and the last
	// instant it is accepted, if any. A node whose measurement and host data
	// match no reference is MEASUREMENT_NOT_ALLOWED; one that matches only
	// references past their notAfter is MEASUREMENT_EXPIRED. With
	// allowedMeasurements too, both must accept the node.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +optional
	ReferenceValues []MeasurementReference `json:"referenceValues,omitempty"`

	// minSNPTCB, when set, is the lowest SEV-SNP platform TCB accepted:
	// every level of the node's reported TCB must be at least this one's
	// (TCB_OUT_OF_DATE otherwise). Nodes in another TEE are not judged by it.
	// +optional
	MinSNPTCB *SNPTCB `json:"minSNPTCB,omitempty"`

	// minTDXTCBSVN, when set, is the lowest TDX TEE_TCB_SVN accepted, in
	// lowercase hex (16 bytes): every one of the node's 16 components must
	// be at least this one's (TCB_OUT_OF_DATE otherwise). Nodes in another
	// TEE are not judged by it.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{32}$`
	// +optional
	MinTDXTCBSVN string `json:"minTDXTCBSVN,omitempty"`

	// allowedImageDigests, when set, lists the only image digests the
	// tenant's containers may run, each sha256:<64 hex>: every init,
	// regular and ephemeral container must name its image by digest
	// (IMAGE_NOT_PINNED otherwise) and the digest must be listed
	// (IMAGE_NOT_ALLOWED otherwise). The admission webhook judges it at
	// every pod CREATE and UPDATE, so that what runs in a measured TEE is
	// what the tenant's platform team approved.
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:Pattern=`^sha256:[0-9a-f]{64}$`
	// +optional
	AllowedImageDigests []string `json:"allowedImageDigests,omitempty"`

	// requireAttestation requires a Passed attestation verdict no older than
	// maxAttestationAge. A missing or stale verdict is indeterminate
	// (ATTESTATION_MISSING, ATTESTATION_STALE); a Failed one denies
	// (ATTESTATION_FAILED).
	// +optional
	RequireAttestation bool `json:"requireAttestation,omitempty"`

	// maxAttestationAge is the oldest an attestation verdict may be, as a Go
	// duration of at least 1s; only with requireAttestation. Defaults to 1h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,4}$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,4}$') || duration(self) >= duration('1s')",message="must be at least 1s"
	// +optional
	MaxAttestationAge *metav1.Duration `json:"maxAttestationAge,omitempty"`
}

// MeasurementReference is one launch measurement a policy accepts.
type MeasurementReference struct {
	// measurement is the SEV-SNP MEASUREMENT or TDX MRTD accepted,
	// sha256:<64 hex> or sha384:<96 hex> in lowercase.
	// +required
	Measurement Measurement `json:"measurement"`

	// hostData, when set, must equal the node's host data, in lowercase
	// hex: SEV-SNP HOST_DATA (64 digits) or TDX MRCONFIGID (96 digits).
	// +kubebuilder:validation:MaxLength=96
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{64}|[0-9a-f]{96})$`
	// +optional
	HostData string `json:"hostData,omitempty"`

	// notAfter, when set, is the last instant the reference accepts the
	// measurement, e.g. the end of a release's support.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
}

// PlacementPolicyStatus is what the platform observed about a policy.
type PlacementPolicyStatus struct {
	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the policy's state; Ready is True once the policy
	// is in effect: its spec is valid and a TenantBinding's namespaces
	// resolve to it.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// bindings is how many TenantBindings have a namespace that resolves
	// to the policy.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Bindings int32 `json:"bindings"`
}

// PlacementPolicyList is a list of PlacementPolicy.
// +kubebuilder:object:root=true
type PlacementPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the policies.
	Items []PlacementPolicy `json:"items"`
}
