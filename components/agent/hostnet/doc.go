// Package hostnet reads what the agent needs from the node's network
// namespace: which host-side interface each local pod address is routed
// through, and the node's own addresses (the peers that must always reach
// local pods, such as the kubelet's probes).
//
// Point-to-point pod networks (the ptp CNI plugin, and most routed CNIs)
// install one host route per pod address, "10.244.1.5 dev veth1a2b scope
// host": the route's interface is the pod's host-side veth. Such a veth is a
// pod interface even before any pod is known to own it (State.PodInterfaces).
package hostnet
