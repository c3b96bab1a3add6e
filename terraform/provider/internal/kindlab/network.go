package kindlab

import (
	_ "embed"
)

// nodeNetworkScript sets up pod networking on one node: the lab's CNI
// configuration, routes to the other nodes, masquerade and bpffs. It is the
// file hack/kind-network.sh runs, so make kind-up and the provider give pods
// the same network.
//
//go:embed node-network.sh
var nodeNetworkScript string

// NodeNetwork is what the pod network set-up needs to know about one node.
type NodeNetwork struct {
	Name       string
	PodCIDR    string
	InternalIP string
}

// NetworkCommand is the command, run inside node's container, that gives
// node pod networking: its CNI configuration for node.PodCIDR, and a route
// to the pod CIDR of every other node in all through that node. Running it
// again converges.
func NetworkCommand(node NodeNetwork, all []NodeNetwork, podSubnet string) []string {
	cmd := []string{"bash", "-c", nodeNetworkScript, "node-network.sh", node.PodCIDR, podSubnet}
	for _, peer := range all {
		if peer.Name != node.Name {
			cmd = append(cmd, peer.PodCIDR+"="+peer.InternalIP)
		}
	}
	return cmd
}
