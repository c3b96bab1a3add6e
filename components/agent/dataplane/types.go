package dataplane

// Types shared with code that does not run the dataplane itself, so that it
// builds on every platform; the Dataplane lives in the linux-only files.

import (
	"errors"
	"net/netip"
)

// AttachMode chooses how the tc programs are attached.
type AttachMode int

const (
	// AttachAuto uses TCX links when the kernel has them (6.6+) and clsact
	// filters otherwise.
	AttachAuto AttachMode = iota
	// AttachTCX requires TCX links.
	AttachTCX
	// AttachClsact uses classic clsact qdisc filters.
	AttachClsact
)

// Config configures Open.
type Config struct {
	// PinPath is a directory on a bpffs mount where maps and links are
	// pinned, e.g. /sys/fs/bpf/xila-guard. It is created if missing.
	PinPath string
	// Attach chooses TCX or clsact; the zero value picks for the kernel.
	Attach AttachMode
}

// Endpoint is a pod as the dataplane sees it.
type Endpoint struct {
	// Ifindex is the pod's host-side interface in the agent's network
	// namespace.
	Ifindex int
	// Addrs are the pod's own addresses. Packets from the pod with any
	// other source are dropped, so that peers' policies can trust source
	// addresses.
	Addrs []netip.Addr
	// AnySource turns that check off, for pods that route for others.
	AnySource bool
}

// ErrDenyAll wraps the error of an Apply that could not install the
// requested rules and left the endpoint denying all traffic instead.
var ErrDenyAll = errors.New("endpoint falls back to deny-all")

// Stats counts packets by verdict since the maps were created, over all
// CPUs and endpoints.
type Stats struct {
	Allowed        uint64 // new or known flows the policy allows
	Replies        uint64 // replies of allowed flows
	Denied         uint64 // dropped by policy at tc
	Spoofed        uint64 // dropped: source address not the pod's
	Deferred       uint64 // sent to a Service address, judged after DNAT
	Malformed      uint64 // IP packets too short to judge
	PostNATAllowed uint64 // Service flows allowed after DNAT
	PostNATDenied  uint64 // Service packets dropped after DNAT
	Related        uint64 // ICMP errors about tracked flows
}
