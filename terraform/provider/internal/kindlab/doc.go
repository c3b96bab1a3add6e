// Package kindlab creates and deletes the Xila Guard lab cluster through the
// kind library: the topology of hack/kind/cluster.yaml, the pod networking of
// hack/kind-network.sh (node-network.sh, embedded here and run by that
// script too: ptp + host-local + portmap per node, routes between nodes,
// masquerade out of the pod network), and local images loaded into every
// node.
package kindlab
