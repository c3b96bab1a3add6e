package guard

import "time"

// GroupName is the API group of every Xila Guard custom resource.
const GroupName = "guard.xila.us"

// Labels, annotations and taints set by administrators or by Xila Guard.
const (
	// LabelTenantPool marks a node as a member of a tenant's protected pool;
	// its value is the pool name, by default the tenant's ID. The observe
	// controller copies it onto the node's NodeSecurityState so that a pool's
	// evidence can be listed with one label selector.
	LabelTenantPool = GroupName + "/tenant-pool"

	// LabelTenant marks a namespace as owned by the tenant named in its value.
	LabelTenant = GroupName + "/tenant"

	// AnnotationPolicy names the PlacementPolicy of a namespace's pods. It is
	// only a fallback: a TenantBinding's effectivePolicyRef always wins.
	AnnotationPolicy = GroupName + "/policy"

	// TaintTenantPool is the key of the NoSchedule taint carried by every pool
	// node, with the pool name as value. It shares its key with
	// LabelTenantPool on purpose: the taint mirrors the label.
	TaintTenantPool = LabelTenantPool

	// DeviceTaintKey is the key of the device taints that take a DRA
	// device whose evidence fails out of service. No tenant's claim may
	// tolerate it.
	DeviceTaintKey = GroupName + "/device-evidence"

	// MockLabelPrefix starts the node labels that describe simulated (mock)
	// evidence in lab clusters, e.g. guard.xila.us/mock-sharing-mode.
	MockLabelPrefix = GroupName + "/mock-"

	// ComplianceLabelPrefix starts the node labels the observe controller
	// keeps, one per PlacementPolicy: compliance.guard.xila.us/<policy> is
	// "true" on a node while the policy allows its tenants' pods there,
	// and absent otherwise. External schedulers that choose a node before
	// anything judges it can require the label in a pod's node affinity;
	// the bind-time judgement stays the backstop.
	ComplianceLabelPrefix = "compliance." + GroupName + "/"

	// TaintTEE is the key of the NoSchedule taint the observe controller
	// keeps on every node whose attested evidence shows a TEE, with the TEE
	// type as value (SEV-SNP, TDX, SGX): scarce confidential nodes are kept
	// for the pods that need them. The webhook's mutating endpoint adds the
	// toleration to pods that request an enclave resource (sgx.intel.com/*)
	// and to pods whose policy asks for a TEE type.
	TaintTEE = GroupName + "/tee"

	// ComplianceLabelValue is the value of a compliance label.
	ComplianceLabelValue = "true"

	// LabelManagedBy with the value ReportsManagedBy marks the
	// PolicyReports (wgpolicyk8s.io) the observe controller keeps: it
	// reads and writes no other, and kubectl xila-guard status counts
	// only those.
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ReportsManagedBy = "xila-guard-observe"
)

// Names of the controlled scheduler and of the evaluator service.
const (
	// SchedulerName is the scheduler profile that protected pods must use.
	SchedulerName = "xila-guard-scheduler"

	// PluginName is the scheduler framework plugin that enforces policy.
	PluginName = "XilaGuardEnforcement"

	// CoreServiceName is the name of the evaluator's binary and Service.
	CoreServiceName = "xila-guard-core"

	// EvaluatePath is the evaluator's HTTP endpoint; it takes a POST.
	EvaluatePath = "/v1alpha1/evaluate"

	// WebhookPath is the admission webhook's endpoint for pods.
	WebhookPath = "/validate-pods"

	// EventReasonPolicyViolation is the reason of the Event recorded on a pod
	// that runs where the evaluator does not allow it.
	EventReasonPolicyViolation = "GuardPolicyViolation"
)

// Environment variables read by the scheduler plugin.
const (
	// EnvEnforceAcceptMock asks the evaluator for the lab profile, under
	// which mock evidence is accepted as simulated integration.
	EnvEnforceAcceptMock = "XILAGUARD_ENFORCE_ACCEPT_MOCK"

	// EnvPoolLabel overrides the node label that defines pools.
	EnvPoolLabel = "XILAGUARD_POOL_LABEL"
)

// Defaults of callers of a xila-guard-core over HTTP.
const (
	// DefaultCoreURL is the base URL of a xila-guard-core on the same host.
	DefaultCoreURL = "http://127.0.0.1:8080"
	// DefaultEvalTimeout bounds one call to a xila-guard-core.
	DefaultEvalTimeout = 800 * time.Millisecond
)

// The pod annotation that records what a pod was bound against.
const (
	// AnnotationBoundEvidence records, on a pod, the node UID and the
	// evidence incarnation the pod was judged on when it was bound, as
	// "<node UID>/<incarnation>". The controlled scheduler puts it on the
	// Binding it binds the pod with (what PreBind judged), which the API
	// server copies onto the pod as it sets the node; an admission policy
	// lets it be written only so, and only by the platform. The key broker releases a key to the pod only while its node's
	// evidence still has that node UID and incarnation: a node rebooted or
	// re-provisioned since the bind gets nothing until the pod is placed
	// again.
	AnnotationBoundEvidence = GroupName + "/bound-evidence"
)

// Names of the key broker.
const (
	// KeyBrokerAudience is the audience of the projected service-account
	// token a pod presents to the key broker.
	KeyBrokerAudience = "xila-guard-kbs"

	// EventReasonKeyReleased and EventReasonKeyRefused are the reasons of
	// the Events the key broker records on a pod.
	EventReasonKeyReleased = "KeyReleased"
	// EventReasonKeyRefused: see EventReasonKeyReleased.
	EventReasonKeyRefused = "KeyRefused"
)

// BoundEvidence formats the value of AnnotationBoundEvidence.
func BoundEvidence(nodeUID, incarnation string) string { return nodeUID + "/" + incarnation }
