//go:build linux

package netns

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// Node is a namespace playing a Kubernetes node: pods hang off it on veth
// pairs and it routes between them, like the ptp CNI plugin does.
type Node struct {
	NS   *NS
	Pods []*Pod
}

// Pod is a namespace with one veth whose other end is on the node.
type Pod struct {
	Name    string
	NS      *NS
	HostIf  string // the node-side veth
	Ifindex int    // its index in the node namespace
	V4, V6  netip.Addr
}

// Addrs returns the pod's addresses.
func (p *Pod) Addrs() []netip.Addr { return []netip.Addr{p.V4, p.V6} }

// gateway is the node's address as pods see it, on every node-side veth.
const (
	gatewayV4 = "169.254.1.1"
	gatewayV6 = "fe80::1"
)

// NewNode builds a node namespace with n pods: pod i has 10.200.0.(i+1) and
// fd00:200::(i+1), a default route to the node, and a /32 and /128 route on
// the node. Everything is removed when the test ends.
func NewNode(t testing.TB, n int) *Node {
	t.Helper()
	node := &Node{NS: Add(t, Prefix()+"-node")}
	node.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
		"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	for range n {
		node.AddPod(t)
	}
	return node
}

// AddPod wires one more pod to the node, as the ptp CNI plugin does when a
// pod's sandbox starts: the veth pair, the pod's addresses and routes, then
// the node's host routes to it.
func (node *Node) AddPod(t testing.TB) *Pod {
	t.Helper()
	p := node.AddPodWithoutRoutes(t)
	node.RoutePod(t, p)
	return p
}

// RoutePod adds the node's host routes to the pod, the last step of the
// CNI plugin's set-up.
func (node *Node) RoutePod(t testing.TB, p *Pod) {
	t.Helper()
	node.NS.MustRun(t, "ip", "route", "add", p.V4.String()+"/32", "dev", p.HostIf)
	node.NS.MustRun(t, "ip", "-6", "route", "add", p.V6.String()+"/128", "dev", p.HostIf)
}

// AddPodWithoutRoutes is AddPod up to the node's host routes.
func (node *Node) AddPodWithoutRoutes(t testing.TB) *Pod {
	t.Helper()
	i := len(node.Pods)
	prefix := strings.TrimSuffix(node.NS.Name, "-node")
	p := &Pod{
		Name:   fmt.Sprintf("pod%d", i),
		NS:     Add(t, fmt.Sprintf("%s-p%d", prefix, i)),
		HostIf: fmt.Sprintf("%sh%d", prefix, i),
		V4:     netip.AddrFrom4([4]byte{10, 200, 0, byte(i + 1)}),
		V6:     netip.MustParseAddr(fmt.Sprintf("fd00:200::%x", i+1)),
	}
	p.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	node.NS.MustRun(t, "ip", "link", "add", p.HostIf, "type", "veth", "peer", "name", "eth0", "netns", p.NS.Name)
	for _, args := range [][]string{
		{"ip", "addr", "add", p.V4.String() + "/32", "dev", "eth0"},
		{"ip", "-6", "addr", "add", p.V6.String() + "/128", "dev", "eth0", "nodad"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", gatewayV4, "dev", "eth0", "scope", "link"},
		{"ip", "route", "add", "default", "via", gatewayV4, "dev", "eth0"},
		{"ip", "-6", "route", "add", "default", "via", gatewayV6, "dev", "eth0"},
	} {
		p.NS.MustRun(t, args...)
	}
	for _, args := range [][]string{
		{"ip", "addr", "add", gatewayV4 + "/32", "dev", p.HostIf},
		{"ip", "-6", "addr", "add", gatewayV6 + "/64", "dev", p.HostIf, "nodad"},
		{"ip", "link", "set", p.HostIf, "up"},
	} {
		node.NS.MustRun(t, args...)
	}
	if err := node.NS.Do(func() error {
		ifc, err := net.InterfaceByName(p.HostIf)
		if err != nil {
			return err
		}
		p.Ifindex = ifc.Index
		return nil
	}); err != nil {
		t.Fatalf("finding %s: %v", p.HostIf, err)
	}
	node.Pods = append(node.Pods, p)
	return p
}
