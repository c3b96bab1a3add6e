package rules

import (
	"fmt"
	"net/netip"
	"slices"
)

// Entry allows the addresses of Prefix to use Ports.
type Entry struct {
	Prefix netip.Prefix
	Ports  PortSet
}

// RuleSet is what one pod allows in one direction. When Isolated is false
// the pod is not selected by any policy for this direction and everything
// passes; otherwise only what Entries allow passes. Entries are sorted, free
// of duplicates and flattened: an entry nested in another already includes
// the other's ports, so the longest matching prefix decides.
type RuleSet struct {
	Isolated bool
	Entries  []Entry
}

// DenyAll is an isolated rule set that allows nothing.
var DenyAll = RuleSet{Isolated: true}

// AllowAll is the rule set of a pod that no policy isolates.
var AllowAll = RuleSet{}

// Allows reports whether a peer at addr may use proto/port, answering with
// a longest-prefix match exactly as the dataplane does.
func (r RuleSet) Allows(addr netip.Addr, proto Protocol, port uint16) bool {
	if !r.Isolated {
		return true
	}
	addr = addr.Unmap()
	best := -1
	for i, e := range r.Entries {
		if e.Prefix.Contains(addr) && (best < 0 || e.Prefix.Bits() > r.Entries[best].Prefix.Bits()) {
			best = i
		}
	}
	return best >= 0 && r.Entries[best].Ports.Allows(proto, port)
}

// Equal reports whether two rule sets are identical.
func (r RuleSet) Equal(o RuleSet) bool {
	return r.Isolated == o.Isolated && slices.EqualFunc(r.Entries, o.Entries, func(a, b Entry) bool {
		return a.Prefix == b.Prefix && a.Ports.Equal(b.Ports)
	})
}

// String formats the set for logs and test failures.
func (r RuleSet) String() string {
	if !r.Isolated {
		return "allow-all"
	}
	s := "isolated["
	for i, e := range r.Entries {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s%s", e.Prefix, e.Ports)
	}
	return s + "]"
}

// Builder collects what a pod allows in one direction, from any number of
// overlapping rules, and flattens it into a RuleSet. The zero value is ready.
type Builder struct {
	m map[netip.Prefix]PortSet
}

// Add allows the addresses of p to use ports, in addition to everything
// added before.
func (b *Builder) Add(p netip.Prefix, ports PortSet) {
	if ports.Empty() || !p.IsValid() {
		return
	}
	if b.m == nil {
		b.m = make(map[netip.Prefix]PortSet)
	}
	p = Canonical(p)
	if old, ok := b.m[p]; ok {
		if old.Any {
			return
		}
		ports = Union(old, ports)
	} else {
		ports = ports.Normalize()
	}
	b.m[p] = ports
}

// AddExcept allows cidr minus every prefix in except to use ports.
func (b *Builder) AddExcept(cidr netip.Prefix, except []netip.Prefix, ports PortSet) {
	for _, p := range Subtract(cidr, except) {
		b.Add(p, ports)
	}
}

// Len returns the number of distinct prefixes added so far, which is the
// number of entries Build will return.
func (b *Builder) Len() int { return len(b.m) }

// Build returns the flattened rule set. isolated=false returns AllowAll
// whatever was added.
func (b *Builder) Build(isolated bool) RuleSet {
	if !isolated {
		return AllowAll
	}
	out := RuleSet{Isolated: true, Entries: make([]Entry, 0, len(b.m))}
	for p, ports := range b.m {
		out.Entries = append(out.Entries, Entry{Prefix: p, Ports: ports})
	}
	slices.SortFunc(out.Entries, func(a, b Entry) int { return comparePrefixes(a.Prefix, b.Prefix) })
	// Walk in order with a stack of enclosing prefixes: each entry inherits
	// the flattened ports of its closest enclosing entry.
	var stack []int
	for i := range out.Entries {
		e := &out.Entries[i]
		for len(stack) > 0 && !Contains(out.Entries[stack[len(stack)-1]].Prefix, e.Prefix) {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			if parent := out.Entries[stack[len(stack)-1]].Ports; !parent.Empty() && !e.Ports.Any {
				e.Ports = Union(parent, e.Ports)
			}
		}
		stack = append(stack, i)
	}
	return out
}
