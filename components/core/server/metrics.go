package server

import (
	"strconv"
	"sync"

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

	mu         sync.RWMutex
	byDecision map[decisionKey]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xila_guard_core_http_requests_total",
			Help: "HTTP requests served, by handler and status code.",
		}, []string{"handler", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "xila_guard_core_http_request_duration_seconds",
			Help: "Time to serve an HTTP request, from headers read to response written.",
			// From 50µs to 2.5s: one node takes well under a millisecond,
			// thousands take tens of milliseconds.
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 13),
		}, []string{"handler"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xila_guard_core_decisions_total",
			Help: "Node decisions made, by decision and reason; a decision with several reasons counts once per reason, one without any under reason NONE.",
		}, []string{"decision", "reason"}),
		nodes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "xila_guard_core_request_nodes",
			Help:    "Candidate nodes per evaluation request.",
			Buckets: []float64{0, 1, 10, 100, 1000, 5000, 10000},
		}),
		byDecision: map[decisionKey]prometheus.Counter{},
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

// decisionCount is how many times one label pair occurs in an answer.
type decisionCount struct {
	key decisionKey
	n   int
}

// observe counts a response's decisions, adding up per label pair first so
// that a 5,000-node answer costs a handful of counter updates. Answers hold
// a few distinct pairs, so a short list beats a map.
func (m *metrics) observe(resp *wire.EvaluateResponse) {
	m.nodes.Observe(float64(len(resp.Results)))
	var buf [8]decisionCount
	counts := buf[:0]
	add := func(k decisionKey) {
		for i := range counts {
			if counts[i].key == k {
				counts[i].n++
				return
			}
		}
		counts = append(counts, decisionCount{k, 1})
	}
	for i := range resp.Results {
		r := &resp.Results[i]
		if len(r.Reasons) == 0 {
			add(decisionKey{r.Decision, "NONE"})
		}
		for _, reason := range r.Reasons {
			if !reason.IsKnown() {
				reason = "OTHER"
			}
			add(decisionKey{r.Decision, reason})
		}
	}
	for _, c := range counts {
		m.decisionCounter(c.key).Add(float64(c.n))
	}
}

// decisionCounter returns the counter of a label pair, looked up in the
// vector once per pair and process rather than once per request.
func (m *metrics) decisionCounter(k decisionKey) prometheus.Counter {
	m.mu.RLock()
	c, ok := m.byDecision[k]
	m.mu.RUnlock()
	if ok {
		return c
	}
	c = m.decisions.WithLabelValues(string(k.decision), string(k.reason))
	m.mu.Lock()
	m.byDecision[k] = c
	m.mu.Unlock()
	return c
}

// handlerMetrics are the request metrics of one handler, with a counter
// per status code looked up once.
type handlerMetrics struct {
	name     string
	requests *prometheus.CounterVec
	latency  prometheus.Observer

	mu     sync.RWMutex
	byCode map[int]prometheus.Counter
}

func (m *metrics) forHandler(name string) *handlerMetrics {
	return &handlerMetrics{name: name, requests: m.requests, latency: m.latency.WithLabelValues(name),
		byCode: map[int]prometheus.Counter{}}
}

// count counts a request answered with code.
func (h *handlerMetrics) count(code int) {
	h.mu.RLock()
	c, ok := h.byCode[code]
	h.mu.RUnlock()
	if !ok {
		c = h.requests.WithLabelValues(h.name, strconv.Itoa(code))
		h.mu.Lock()
		h.byCode[code] = c
		h.mu.Unlock()
	}
	c.Inc()
}
