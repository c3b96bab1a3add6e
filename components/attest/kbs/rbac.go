package kbs

// RBAC of the key broker's service account. config/kbs-rbac/role.yaml is
// generated from these markers. It reviews tokens, reads pods, nodes and
// evidence from the API server (get only, never a cache), caches
// namespaces and the guard kinds, and records Events; it writes nothing
// else. The key Secrets are read in the broker's own namespace only: the
// chart grants that with a Role.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=guard.xila.us,resources=nodesecuritystates,verbs=get
// +kubebuilder:rbac:groups=guard.xila.us,resources=tenantbindings;placementpolicies;keyreleasepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io;"",resources=events,verbs=create;patch
