package rules

import (
	"net/netip"
	"slices"
	"testing"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func pfxs(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, pfx(s))
	}
	return out
}

func TestSubtract(t *testing.T) {
	tests := []struct {
		name   string
		cidr   string
		except []string
		want   []string
	}{
		{name: "no except", cidr: "10.0.0.0/8", want: []string{"10.0.0.0/8"}},
		{name: "except covers all", cidr: "10.0.0.0/8", except: []string{"10.0.0.0/8"}, want: nil},
		{name: "except wider", cidr: "10.1.0.0/16", except: []string{"10.0.0.0/8"}, want: nil},
		{name: "one hole", cidr: "10.0.0.0/30", except: []string{"10.0.0.1/32"},
			want: []string{"10.0.0.0/32", "10.0.0.2/31"}},
		{name: "disjoint except ignored", cidr: "10.0.0.0/24", except: []string{"192.168.0.0/16"},
			want: []string{"10.0.0.0/24"}},
		{name: "other family ignored", cidr: "10.0.0.0/24", except: []string{"fd00::/8"},
			want: []string{"10.0.0.0/24"}},
		{name: "two holes", cidr: "10.0.0.0/29", except: []string{"10.0.0.0/31", "10.0.0.6/32"},
			want: []string{"10.0.0.2/31", "10.0.0.4/31", "10.0.0.7/32"}},
		{name: "ipv6", cidr: "fd00::/126", except: []string{"fd00::3/128"},
			want: []string{"fd00::/127", "fd00::2/128"}},
		{name: "unmasked input", cidr: "10.0.0.77/30", except: []string{"10.0.0.76/32"},
			want: []string{"10.0.0.77/32", "10.0.0.78/31"}},
		{name: "mapped ipv4", cidr: "::ffff:10.0.0.0/126", want: []string{"10.0.0.0/30"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Subtract(pfx(tc.cidr), pfxs(tc.except...))
			if want := pfxs(tc.want...); !slices.Equal(got, want) {
				t.Fatalf("Subtract(%s, %v) = %v, want %v", tc.cidr, tc.except, got, want)
			}
		})
	}
}

// TestSubtractExhaustive checks every address of a small block against the
// definition of set difference.
func TestSubtractExhaustive(t *testing.T) {
	cidr := pfx("10.0.0.0/24")
	except := pfxs("10.0.0.0/26", "10.0.0.100/30", "10.0.0.255/32", "10.0.0.128/27")
	got := Subtract(cidr, except)
	for i := range 256 {
		a := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
		want := !slices.ContainsFunc(except, func(e netip.Prefix) bool { return e.Contains(a) })
		in := slices.ContainsFunc(got, func(p netip.Prefix) bool { return p.Contains(a) })
		if in != want {
			t.Errorf("%s: in result = %v, want %v", a, in, want)
		}
	}
}

func tcp(first, last uint16) PortRange { return PortRange{Protocol: TCP, First: first, Last: last} }

func TestPortSetNormalizeUnion(t *testing.T) {
	tests := []struct {
		name string
		a, b PortSet
		want PortSet
	}{
		{name: "empty", want: PortSet{}},
		{name: "any wins", a: PortSet{Ranges: []PortRange{tcp(80, 80)}}, b: AnyPort, want: AnyPort},
		{name: "merge overlap", a: PortSet{Ranges: []PortRange{tcp(80, 90)}}, b: PortSet{Ranges: []PortRange{tcp(85, 100)}},
			want: PortSet{Ranges: []PortRange{tcp(80, 100)}}},
		{name: "merge adjacent", a: PortSet{Ranges: []PortRange{tcp(80, 80)}}, b: PortSet{Ranges: []PortRange{tcp(81, 81)}},
			want: PortSet{Ranges: []PortRange{tcp(80, 81)}}},
		{name: "keep gap", a: PortSet{Ranges: []PortRange{tcp(80, 80)}}, b: PortSet{Ranges: []PortRange{tcp(82, 82)}},
			want: PortSet{Ranges: []PortRange{tcp(80, 80), tcp(82, 82)}}},
		{name: "protocols stay apart", a: PortSet{Ranges: []PortRange{tcp(80, 80)}},
			b:    PortSet{Ranges: []PortRange{{Protocol: SCTP, First: 80, Last: 80}}},
			want: PortSet{Ranges: []PortRange{tcp(80, 80), {Protocol: SCTP, First: 80, Last: 80}}}},
		{name: "top of range", a: PortSet{Ranges: []PortRange{tcp(65535, 65535)}}, b: PortSet{Ranges: []PortRange{tcp(1, 65534)}},
			want: PortSet{Ranges: []PortRange{tcp(1, 65535)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Union(tc.a, tc.b); !got.Equal(tc.want) {
				t.Fatalf("Union(%s, %s) = %s, want %s", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestPortSetAllows(t *testing.T) {
	s := PortSet{Ranges: []PortRange{tcp(80, 80), {Protocol: UDP, First: 1000, Last: 2000}}}
	tests := []struct {
		name  string
		proto Protocol
		port  uint16
		want  bool
	}{
		{"tcp exact", TCP, 80, true},
		{"tcp other", TCP, 81, false},
		{"udp in range", UDP, 1500, true},
		{"udp range edge", UDP, 2000, true},
		{"udp past range", UDP, 2001, false},
		{"sctp is not tcp", SCTP, 80, false},
		{"icmp needs any", Protocol(1), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Allows(tc.proto, tc.port); got != tc.want {
				t.Fatalf("Allows(%s, %d) = %v, want %v", tc.proto, tc.port, got, tc.want)
			}
		})
	}
	if !AnyPort.Allows(Protocol(1), 0) {
		t.Fatal("AnyPort must allow ICMP")
	}
}

func TestBuilderFlattens(t *testing.T) {
	var b Builder
	b.Add(pfx("10.0.0.0/8"), PortSet{Ranges: []PortRange{tcp(80, 80)}})
	b.Add(pfx("10.1.0.0/16"), PortSet{Ranges: []PortRange{tcp(443, 443)}})
	b.Add(pfx("10.1.2.3/32"), AnyPort)
	b.Add(pfx("10.1.0.0/16"), PortSet{Ranges: []PortRange{tcp(444, 444)}})
	b.Add(pfx("fd00::/64"), PortSet{Ranges: []PortRange{tcp(22, 22)}})
	b.Add(pfx("192.168.0.0/16"), PortSet{}) // empty: ignored
	got := b.Build(true)
	want := RuleSet{Isolated: true, Entries: []Entry{
		{pfx("10.0.0.0/8"), PortSet{Ranges: []PortRange{tcp(80, 80)}}},
		{pfx("10.1.0.0/16"), PortSet{Ranges: []PortRange{tcp(80, 80), tcp(443, 444)}}},
		{pfx("10.1.2.3/32"), AnyPort},
		{pfx("fd00::/64"), PortSet{Ranges: []PortRange{tcp(22, 22)}}},
	}}
	if !got.Equal(want) {
		t.Fatalf("Build() = %s\nwant      %s", got, want)
	}
	if b.Build(false).Isolated {
		t.Fatal("Build(false) must not isolate")
	}
}

func TestRuleSetAllowsLongestPrefix(t *testing.T) {
	var b Builder
	b.AddExcept(pfx("10.0.0.0/8"), pfxs("10.9.0.0/16"), PortSet{Ranges: []PortRange{tcp(80, 80)}})
	b.Add(pfx("10.9.9.9/32"), PortSet{Ranges: []PortRange{tcp(22, 22)}})
	rs := b.Build(true)
	tests := []struct {
		addr string
		port uint16
		want bool
	}{
		{"10.1.1.1", 80, true},
		{"10.9.1.1", 80, false}, // in the exception
		{"10.9.9.9", 22, true},
		{"10.9.9.9", 80, false}, // the exception still applies to it
		{"11.0.0.1", 80, false},
		{"::ffff:10.1.1.1", 80, true},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			if got := rs.Allows(netip.MustParseAddr(tc.addr), TCP, tc.port); got != tc.want {
				t.Fatalf("Allows(%s, %d) = %v, want %v in %s", tc.addr, tc.port, got, tc.want, rs)
			}
		})
	}
}

func TestBuilderMergesSortedRuns(t *testing.T) {
	shared := SortPrefixes(pfxs("10.0.0.2/32", "10.0.0.0/8", "10.0.0.2/32", "fd00::/64"))
	var b Builder
	b.AddSorted(shared, PortSet{Ranges: []PortRange{tcp(80, 80)}})
	b.AddSortedEntries(SortEntries([]Entry{
		{pfx("10.0.0.2/32"), PortSet{Ranges: []PortRange{tcp(443, 443)}}},
		{pfx("10.0.0.3/32"), PortSet{Ranges: []PortRange{tcp(22, 22)}}},
		{pfx("10.0.0.3/32"), PortSet{Ranges: []PortRange{tcp(23, 23)}}},
	}))
	b.Add(pfx("fd00::1/128"), AnyPort)
	got := b.Build(true)
	want := RuleSet{Isolated: true, Entries: []Entry{
		{pfx("10.0.0.0/8"), PortSet{Ranges: []PortRange{tcp(80, 80)}}},
		{pfx("10.0.0.2/32"), PortSet{Ranges: []PortRange{tcp(80, 80), tcp(443, 443)}}},
		{pfx("10.0.0.3/32"), PortSet{Ranges: []PortRange{tcp(22, 23), tcp(80, 80)}}},
		{pfx("fd00::/64"), PortSet{Ranges: []PortRange{tcp(80, 80)}}},
		{pfx("fd00::1/128"), AnyPort},
	}}
	if !got.Equal(want) {
		t.Fatalf("Build() = %s\nwant      %s", got, want)
	}
	if len(shared) != 3 {
		t.Fatalf("SortPrefixes kept %d prefixes, want 3 without the duplicate", len(shared))
	}
}
