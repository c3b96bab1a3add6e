package hostnet

import (
	"net/netip"
	"slices"
	"testing"
)

func TestInterface(t *testing.T) {
	st := State{Routes: map[netip.Addr]int{
		netip.MustParseAddr("10.244.1.5"): 7,
		netip.MustParseAddr("fd00::5"):    7,
		netip.MustParseAddr("10.244.1.6"): 8,
	}}
	for _, tc := range []struct {
		name  string
		addrs []string
		want  int
	}{
		{"v4 routed", []string{"10.244.1.5"}, 7},
		{"dual stack agreeing", []string{"10.244.1.5", "fd00::5"}, 7},
		{"second family not routed yet", []string{"10.244.1.6", "fd00::6"}, 8},
		{"families disagree", []string{"10.244.1.6", "fd00::5"}, 0},
		{"not routed", []string{"10.244.1.9"}, 0},
		{"no addresses", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addrs []netip.Addr
			for _, a := range tc.addrs {
				addrs = append(addrs, netip.MustParseAddr(a))
			}
			if got := st.Interface(addrs); got != tc.want {
				t.Errorf("Interface(%v) = %d, want %d", tc.addrs, got, tc.want)
			}
		})
	}
}

func TestUsable(t *testing.T) {
	for a, want := range map[string]bool{
		"172.18.0.3":  true,
		"10.244.1.1":  true,
		"169.254.1.1": true,
		"2001:db8::1": true,
		"fd00::1":     true,
		"127.0.0.1":   false,
		"::1":         false,
		"fe80::1":     false,
		"0.0.0.0":     false,
		"224.0.0.1":   false,
	} {
		if got := usable(netip.MustParseAddr(a)); got != want {
			t.Errorf("usable(%s) = %v, want %v", a, got, want)
		}
	}
}

func TestHostPeers(t *testing.T) {
	st := State{Addrs: []netip.Addr{netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("fd00::1")}}
	want := []netip.Prefix{netip.MustParsePrefix("172.18.0.3/32"), netip.MustParsePrefix("fd00::1/128")}
	if got := st.HostPeers(); !slices.Equal(got, want) {
		t.Errorf("HostPeers() = %v, want %v", got, want)
	}
}
