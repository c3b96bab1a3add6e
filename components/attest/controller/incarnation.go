package controller

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
)

// Incarnation is the evidence incarnation of a node attested through an
// attester pod: 16 hex digits of SHA-256 over the node's UID, its boot ID
// and the attester pod's UID. It changes when the node is re-provisioned,
// when it reboots, and when its attester is replaced, so that evidence
// judged before any of these is not taken for evidence after it. It is
// known before the challenge, and bound into its nonce.
func Incarnation(node *corev1.Node, attester *corev1.Pod) string {
	sum := sha256.Sum256([]byte(string(node.UID) + "/" + node.Status.NodeInfo.BootID + "/" + string(attester.UID)))
	return hex.EncodeToString(sum[:8])
}
