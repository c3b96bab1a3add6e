package admission

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// trustedPod reports whether a pod of a namespace outside every tenant may
// reach pool nodes: it runs as a trusted service account, its controller
// is a DaemonSet, and, at CREATE (creator not empty), a DaemonSet
// controller creates it. An account is trusted by its namespace and name,
// which only administrators can create (the chart's reserved-namespaces
// policy); the DaemonSet conditions keep the trust to what the account
// needs: its DaemonSet's pods, one on every node, not a pod someone pins
// to one node with the account's name.
func (v *Validator) trustedPod(ns string, pod *corev1.Pod, creator string) bool {
	if !slices.Contains(v.cfg.TrustedServiceAccounts, podServiceAccount(ns, pod)) || !daemonSetPod(pod) {
		return false
	}
	return creator == "" || slices.Contains(v.cfg.DaemonSetControllers, creator)
}

// daemonSetPod reports whether a pod's controller is a DaemonSet.
func daemonSetPod(pod *corev1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "DaemonSet" && ref.APIVersion == "apps/v1" {
			return true
		}
	}
	return false
}
