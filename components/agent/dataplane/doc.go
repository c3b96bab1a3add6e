// Package dataplane loads the eBPF NetworkPolicy programs, attaches them to
// pods' host-side interfaces and keeps each pod's compiled rule sets in
// pinned maps.
//
// Two tc programs on the host-side veth of every managed pod enforce its
// egress (tc ingress: packets from the pod) and ingress (tc egress: packets
// to the pod), through TCX links where the kernel has them and clsact
// filters otherwise. A pod's packets to a Service address are judged once
// kube-proxy has rewritten them, by a netfilter program in FORWARD and
// LOCAL_IN. docs/dataplane.md gives the reasons.
//
// A policy change writes the new rules under a fresh policy id, switches the
// pod's endpoint entry to it in one map update, waits for an RCU grace
// period and only then deletes the old rules, so a packet always meets
// either the old or the new policy in full. ApplyAll switches many pods with
// one grace period for all of them. Maps, links and programs are
// pinned in bpffs: when the agent stops, the last policy stays enforced, and
// Open picks the state up again.
package dataplane
