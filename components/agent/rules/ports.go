package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Protocol is an IP protocol number.
type Protocol uint8

// The protocols NetworkPolicy ports can name.
const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

// HasPorts reports whether the protocol carries ports that a policy can
// restrict; packets of any other protocol match only an unrestricted entry.
func (p Protocol) HasPorts() bool { return p == TCP || p == UDP || p == SCTP }

// String returns the protocol's Kubernetes name or its number.
func (p Protocol) String() string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	case SCTP:
		return "SCTP"
	}
	return fmt.Sprintf("proto-%d", uint8(p))
}

// PortRange is an inclusive range of ports of one protocol.
type PortRange struct {
	Protocol    Protocol
	First, Last uint16
}

// PortSet says which protocols and ports a peer may use. Any allows every
// protocol, including those without ports such as ICMP. Otherwise Ranges, kept
// sorted and merged by Normalize, lists what is allowed; no ranges allows
// nothing.
type PortSet struct {
	Any    bool
	Ranges []PortRange
}

// AnyPort is the set that allows every protocol and port.
var AnyPort = PortSet{Any: true}

// Allows reports whether proto/port is in the set. Without a port (a
// protocol that has none, or a non-first fragment) only Any matches.
func (s PortSet) Allows(proto Protocol, port uint16) bool {
	if s.Any {
		return true
	}
	if !proto.HasPorts() {
		return false
	}
	for _, r := range s.Ranges {
		if r.Protocol == proto && r.First <= port && port <= r.Last {
			return true
		}
	}
	return false
}

// Empty reports whether the set allows nothing.
func (s PortSet) Empty() bool { return !s.Any && len(s.Ranges) == 0 }

// Normalize returns the set with its ranges sorted by protocol and start and
// with overlapping or adjacent ranges merged, so equal sets compare equal.
func (s PortSet) Normalize() PortSet {
	if s.Any {
		return AnyPort
	}
	if len(s.Ranges) == 0 {
		return PortSet{}
	}
	rs := slices.Clone(s.Ranges)
	slices.SortFunc(rs, func(a, b PortRange) int {
		if a.Protocol != b.Protocol {
			return int(a.Protocol) - int(b.Protocol)
		}
		return int(a.First) - int(b.First)
	})
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		// Merge when r starts inside or right after the previous range.
		if r.Protocol == last.Protocol && uint32(r.First) <= uint32(last.Last)+1 {
			last.Last = max(last.Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return PortSet{Ranges: slices.Clip(out)}
}

// normalized reports whether Normalize would return s unchanged.
func (s PortSet) normalized() bool {
	if s.Any {
		return s.Ranges == nil
	}
	for i := 1; i < len(s.Ranges); i++ {
		a, b := s.Ranges[i-1], s.Ranges[i]
		if a.Protocol > b.Protocol || (a.Protocol == b.Protocol && uint32(b.First) <= uint32(a.Last)+1) {
			return false
		}
	}
	for _, r := range s.Ranges {
		if r.First > r.Last {
			return false
		}
	}
	return true
}

// Union returns the normalized set of everything a or b allows.
func Union(a, b PortSet) PortSet {
	switch {
	case a.Any || b.Any:
		return AnyPort
	case len(a.Ranges) == 0:
		return b.Normalize()
	case len(b.Ranges) == 0:
		return a.Normalize()
	}
	return PortSet{Ranges: append(slices.Clone(a.Ranges), b.Ranges...)}.Normalize()
}

// Equal reports whether two normalized sets are the same.
func (s PortSet) Equal(o PortSet) bool {
	return s.Any == o.Any && slices.Equal(s.Ranges, o.Ranges)
}

// Key returns a string that identifies a normalized set, for deduplication.
func (s PortSet) Key() string {
	if s.Any {
		return "*"
	}
	b := make([]byte, 0, 16*len(s.Ranges))
	for _, r := range s.Ranges {
		b = strconv.AppendUint(b, uint64(r.Protocol), 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(r.First), 10)
		b = append(b, '-')
		b = strconv.AppendUint(b, uint64(r.Last), 10)
		b = append(b, ',')
	}
	return string(b)
}

// String formats the set for logs and test failures.
func (s PortSet) String() string {
	if s.Any {
		return "any"
	}
	parts := make([]string, 0, len(s.Ranges))
	for _, r := range s.Ranges {
		if r.First == r.Last {
			parts = append(parts, fmt.Sprintf("%s/%d", r.Protocol, r.First))
		} else {
			parts = append(parts, fmt.Sprintf("%s/%d-%d", r.Protocol, r.First, r.Last))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}
