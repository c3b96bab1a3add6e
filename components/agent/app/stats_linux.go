//go:build linux

package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xila-guard/xila-guard/components/agent/dataplane"
)

// statsCollector exports the dataplane's packet counters.
type statsCollector struct {
	dp   *dataplane.Dataplane
	desc *prometheus.Desc
}

func newStatsCollector(dp *dataplane.Dataplane) *statsCollector {
	return &statsCollector{dp: dp, desc: prometheus.NewDesc("xila_guard_agent_packets_total",
		"Packets judged by the dataplane since its maps were created, by verdict.", []string{"verdict"}, nil)}
}

func (s *statsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := s.dp.Stats()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(s.desc, err)
		return
	}
	for verdict, n := range map[string]uint64{
		"allowed": st.Allowed, "reply": st.Replies, "denied": st.Denied, "spoofed": st.Spoofed,
		"deferred": st.Deferred, "malformed": st.Malformed, "post_nat_allowed": st.PostNATAllowed,
		"post_nat_denied": st.PostNATDenied, "related": st.Related,
	} {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, float64(n), verdict)
	}
}
