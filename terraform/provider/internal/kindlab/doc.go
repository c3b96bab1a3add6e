// Package kindlab creates and deletes the Xila Guard lab cluster through the
// kind library: the topology of hack/kind/cluster.yaml, the pod networking of
// hack/kind-network.sh (ptp + host-local + portmap per node, routes between
// nodes, masquerade out of the pod network), and local images loaded into
// every node.
package kindlab
