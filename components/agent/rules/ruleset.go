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
//
// Rules shared by many pods are best added as sorted runs (AddSorted,
// AddSortedEntries), sorted once with SortPrefixes or SortEntries: Build
// then merges them in linear time instead of sorting again per pod.
type Builder struct {
	loose []Entry
	runs  []run
}

// run is a sorted list of contributions: prefixes sharing one port set, or
// entries with their own.
type run struct {
	prefixes []netip.Prefix
	ports    PortSet
	entries  []Entry
}

func (r run) len() int { return len(r.prefixes) + len(r.entries) }

func (r run) at(i int) (netip.Prefix, PortSet) {
	if r.entries != nil {
		return r.entries[i].Prefix, r.entries[i].Ports
	}
	return r.prefixes[i], r.ports
}

// Add allows the addresses of p to use ports, in addition to everything
// added before.
func (b *Builder) Add(p netip.Prefix, ports PortSet) {
	if ports.Empty() || !p.IsValid() {
		return
	}
	b.loose = append(b.loose, Entry{Prefix: Canonical(p), Ports: ports})
}

// AddExcept allows cidr minus every prefix in except to use ports.
func (b *Builder) AddExcept(cidr netip.Prefix, except []netip.Prefix, ports PortSet) {
	for _, p := range Subtract(cidr, except) {
		b.Add(p, ports)
	}
}

// AddSorted allows every prefix to use ports. The prefixes must come from
// SortPrefixes; the Builder keeps them without copying.
func (b *Builder) AddSorted(prefixes []netip.Prefix, ports PortSet) {
	if ports.Empty() || len(prefixes) == 0 {
		return
	}
	if !ports.normalized() {
		ports = ports.Normalize()
	}
	b.runs = append(b.runs, run{prefixes: prefixes, ports: ports})
}

// AddSortedEntries adds entries that come from SortEntries; the Builder
// keeps them without copying.
func (b *Builder) AddSortedEntries(entries []Entry) {
	if len(entries) > 0 {
		b.runs = append(b.runs, run{entries: entries})
	}
}

// SortPrefixes returns the prefixes canonical, sorted and without
// duplicates, ready for AddSorted.
func SortPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.IsValid() {
			out = append(out, Canonical(p))
		}
	}
	slices.SortFunc(out, comparePrefixes)
	return slices.Compact(out)
}

// SortEntries returns the entries canonical and sorted, with the ports of
// equal prefixes merged, ready for AddSortedEntries.
func SortEntries(es []Entry) []Entry {
	var b Builder
	for _, e := range es {
		b.Add(e.Prefix, e.Ports)
	}
	return b.merged()
}

// Build returns the flattened rule set. isolated=false returns AllowAll
// whatever was added.
func (b *Builder) Build(isolated bool) RuleSet {
	if !isolated {
		return AllowAll
	}
	out := RuleSet{Isolated: true, Entries: b.merged()}
	// Walk in order with a stack of enclosing prefixes: each entry inherits
	// the flattened ports of its closest enclosing entry.
	var stack []int
	for i := range out.Entries {
		e := &out.Entries[i]
		for len(stack) > 0 && !Contains(out.Entries[stack[len(stack)-1]].Prefix, e.Prefix) {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			if parent := out.Entries[stack[len(stack)-1]].Ports; !e.Ports.Any && !parent.Equal(e.Ports) {
				e.Ports = Union(parent, e.Ports)
			}
		}
		stack = append(stack, i)
	}
	return out
}

// merged sorts the loose contributions and merges every run into one
// sorted list with one entry per prefix.
func (b *Builder) merged() []Entry {
	slices.SortFunc(b.loose, func(x, y Entry) int { return comparePrefixes(x.Prefix, y.Prefix) })
	runs := append(slices.Clip(b.runs), run{entries: b.loose})
	total := 0
	for _, r := range runs {
		total += r.len()
	}
	out := make([]Entry, 0, total)
	pos := make([]int, len(runs))
	for {
		// The smallest head among the runs; runs are few, a scan will do.
		best := -1
		var bp netip.Prefix
		for i, r := range runs {
			if pos[i] == r.len() {
				continue
			}
			if p, _ := r.at(pos[i]); best < 0 || comparePrefixes(p, bp) < 0 {
				best, bp = i, p
			}
		}
		if best < 0 {
			return out
		}
		p, ports := runs[best].at(pos[best])
		pos[best]++
		if !ports.normalized() {
			ports = ports.Normalize()
		}
		if n := len(out); n > 0 && out[n-1].Prefix == p {
			if last := &out[n-1]; !last.Ports.Any && !last.Ports.Equal(ports) {
				last.Ports = Union(last.Ports, ports)
			}
			continue
		}
		out = append(out, Entry{Prefix: p, Ports: ports})
	}
}
