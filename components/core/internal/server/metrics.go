package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// metrics are the server's Prometheus metrics. Every label takes values
// from a closed set, so cardinality stays bounded whatever clients send.
type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	nodes     prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xilaguard_core_http_requests_total",
			Help: "HTTP requests served, by handler and status code.",
		}, []string{"handler", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "xilaguard_core_http_request_duration_seconds",
			Help: "Time to serve an HTTP request, from headers read to response written.",
			// From 50µs to 2.5s: one node takes well under a millisecond,
			// thousands take tens of milliseconds.
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 13),
		}, []string{"handler"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xilaguard_core_decisions_total",
			Help: "Node decisions made, by decision and reason; a decision with several reasons counts once per reason, one without any under reason NONE.",
		}, []string{"decision", "reason"}),
		nodes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "xilaguard_core_request_nodes",
			Help:    "Candidate nodes per evaluation request.",
			Buckets: []float64{0, 1, 10, 100, 1000, 5000, 10000},
		}),
	}
	reg.MustRegister(m.requests, m.latency, m.decisions, m.nodes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// decisionKey is one (decision, reason) label pair.
type decisionKey struct {
	decision guard.Decision
	reason   guard.Reason
}

// observe counts a response's decisions, adding up per label pair first so
// that a 5,000-node answer costs a handful of counter updates.
func (m *metrics) observe(resp *wire.EvaluateResponse) {
	m.nodes.Observe(float64(len(resp.Results)))
	counts := make(map[decisionKey]int, 8)
	for i := range resp.Results {
		r := &resp.Results[i]
		if len(r.Reasons) == 0 {
			counts[decisionKey{r.Decision, "NONE"}]++
		}
		for _, reason := range r.Reasons {
			if !reason.IsKnown() {
				reason = "OTHER"
			}
			counts[decisionKey{r.Decision, reason}]++
		}
	}
	for k, n := range counts {
		m.decisions.WithLabelValues(string(k.decision), string(k.reason)).Add(float64(n))
	}
}
