package kindlab

import (
	"fmt"
	"strings"
)

// NodeNetwork is what the pod network set-up needs to know about one node.
type NodeNetwork struct {
	Name       string
	PodCIDR    string
	InternalIP string
}

// cniConfigPath is where the kubelet's container runtime finds the pod
// network; the name is the one hack/kind-network.sh writes.
const cniConfigPath = "/etc/cni/net.d/10-xila-guard-ptp.conflist"

// CNIConfig is the node's CNI configuration: a point-to-point veth per pod
// with addresses from the node's pod CIDR, and host ports through portmap.
func CNIConfig(podCIDR string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "xila-guard-lab",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      },
      "mtu": 1500
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR)
}

// NetworkScript is the shell script run on node (with CNIConfig on its
// standard input): it installs the CNI configuration atomically, masquerades
// traffic that leaves the pod network, and routes every other node's pod
// CIDR through that node. Running it again converges.
func NetworkScript(node NodeNetwork, all []NodeNetwork, podSubnet string) string {
	var b strings.Builder
	b.WriteString("mkdir -p /etc/cni/net.d\n")
	fmt.Fprintf(&b, "cat >%s.tmp\n", cniConfigPath)
	fmt.Fprintf(&b, "mv %s.tmp %s\n", cniConfigPath, cniConfigPath)
	fmt.Fprintf(&b, "iptables -t nat -C POSTROUTING -s %[1]s ! -d %[2]s -j MASQUERADE 2>/dev/null ||\n  iptables -t nat -A POSTROUTING -s %[1]s ! -d %[2]s -j MASQUERADE\n", node.PodCIDR, podSubnet)
	for _, peer := range all {
		if peer.Name == node.Name {
			continue
		}
		fmt.Fprintf(&b, "ip route replace %s via %s\n", peer.PodCIDR, peer.InternalIP)
	}
	return b.String()
}
