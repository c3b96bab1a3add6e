package compiler

import (
	"errors"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// Input is the cluster state a compilation reads. The compiler never
// modifies it.
type Input struct {
	Pods            []*corev1.Pod
	Namespaces      []*corev1.Namespace
	Services        []*corev1.Service
	NetworkPolicies []*networkingv1.NetworkPolicy
}

// Options tune a compilation. The zero value is valid.
type Options struct {
	// HostPeers may always reach an ingress-isolated pod, on every port:
	// the node's own addresses, so that kubelet probes keep working.
	// Kubernetes lets a node reach its pods whatever the policy says.
	HostPeers []netip.Prefix
	// MaxEntries caps the prefixes of one pod in one direction; 0 means
	// DefaultMaxEntries. It must not exceed what the dataplane maps hold.
	MaxEntries int
	// MaxPortRanges caps the port ranges one prefix may carry; 0 means
	// DefaultMaxPortRanges, the most the dataplane can hold.
	MaxPortRanges int
}

// Limits used when Options leave them zero.
const (
	DefaultMaxEntries    = 65536
	DefaultMaxPortRanges = 32
)

// ErrCapacity marks a result that exceeded a limit of Options.
var ErrCapacity = errors.New("capacity exceeded")

// ErrInvalidPolicy marks a policy the compiler cannot translate exactly.
var ErrInvalidPolicy = errors.New("invalid network policy")

// PodRules is the compiled policy of one pod.
type PodRules struct {
	Pod     types.NamespacedName
	Ingress rules.RuleSet
	Egress  rules.RuleSet
	// Policies names ("namespace/name") every policy that selects the pod,
	// sorted.
	Policies []string
	// Err is set when the pod's policy could not be compiled; Ingress and
	// Egress are then deny-all.
	Err error
}

// denyAll returns r turned into deny-all for both directions with err.
func (r PodRules) denyAll(err error) PodRules {
	r.Ingress, r.Egress, r.Err = rules.DenyAll, rules.DenyAll, err
	return r
}
