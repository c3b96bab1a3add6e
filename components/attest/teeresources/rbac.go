package teeresources

// RBAC of the TEE resource agent's service account.
// config/teeresources-rbac/role.yaml is generated from these markers. It
// reads its own node's NodeSecurityState (watched by name) and its own
// node, and patches the node's status capacity of sgx.intel.com/epc. The
// enclave device plugin talks to the kubelet only.
//
// +kubebuilder:rbac:groups=guard.xila.us,resources=nodesecuritystates,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch
