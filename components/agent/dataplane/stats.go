//go:build linux

package dataplane

import (
	"fmt"

	"github.com/xila-guard/xila-guard/components/agent/internal/bpfobj"
)

// Stats reads the packet counters.
func (d *Dataplane) Stats() (Stats, error) {
	sum := func(s bpfobj.XgXgStat) (uint64, error) {
		var perCPU []uint64
		if err := d.objs.XgStats.Lookup(uint32(s), &perCPU); err != nil {
			return 0, fmt.Errorf("reading counter %d: %w", s, err)
		}
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		return n, nil
	}
	var st Stats
	for s, dst := range map[bpfobj.XgXgStat]*uint64{
		bpfobj.XgXgStatXG_STAT_ALLOWED:          &st.Allowed,
		bpfobj.XgXgStatXG_STAT_REPLY:            &st.Replies,
		bpfobj.XgXgStatXG_STAT_DENIED:           &st.Denied,
		bpfobj.XgXgStatXG_STAT_SPOOFED:          &st.Spoofed,
		bpfobj.XgXgStatXG_STAT_DEFERRED:         &st.Deferred,
		bpfobj.XgXgStatXG_STAT_MALFORMED:        &st.Malformed,
		bpfobj.XgXgStatXG_STAT_POST_NAT_ALLOWED: &st.PostNATAllowed,
		bpfobj.XgXgStatXG_STAT_POST_NAT_DENIED:  &st.PostNATDenied,
		bpfobj.XgXgStatXG_STAT_RELATED:          &st.Related,
	} {
		n, err := sum(s)
		if err != nil {
			return Stats{}, err
		}
		*dst = n
	}
	return st, nil
}
