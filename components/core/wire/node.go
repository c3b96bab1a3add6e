package wire

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// NodeOf returns a Node as the evaluator takes it, with the node's pool
// (the value of its pool label, "" for none) and the GPUs it offers pods,
// counted by what they are (guard.AllocatableGPUs and
// guard.AllocatableSharedGPUs); the caller adds the evidence.
func NodeOf(n *corev1.Node, pool string) Node {
	gpus, shared := guard.AllocatableGPUs(n.Status.Allocatable), guard.AllocatableSharedGPUs(n.Status.Allocatable)
	return Node{Name: n.Name, UID: n.UID, Pool: pool, AllocatableGPUs: &gpus, AllocatableSharedGPUs: &shared}
}
