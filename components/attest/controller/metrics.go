package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Results of one challenge, the result label of attestations_total.
const (
	// ResultPassed: the evidence verified and a Passed verdict was written.
	ResultPassed = "passed"
	// ResultFailed: the evidence was refused and a Failed verdict written.
	ResultFailed = "failed"
	// ResultUnreachable: the attester did not answer; nothing was written.
	ResultUnreachable = "unreachable"
	// ResultError: the controller could not appraise or write the
	// evidence (reference values, the API server); nothing was written.
	ResultError = "error"
)

// reasonNone is the reason label of a challenge without a reason code.
const reasonNone = "NONE"

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	attestations *prometheus.CounterVec
	verification prometheus.Histogram
	challenge    prometheus.Histogram
	ages         *ageCollector
}

// NewMetrics creates the metrics and registers them with reg; with a nil
// reg, with controller-runtime's registry, which the manager serves. now
// is the clock evidence ages are measured with; time.Now when nil.
func NewMetrics(reg prometheus.Registerer, now func() time.Time) (*Metrics, error) {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	if now == nil {
		now = time.Now
	}
	m := &Metrics{
		attestations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xila_guard_attest_attestations_total",
			Help: "Challenges, by result (passed, failed, unreachable, error) and reason code (NONE without one)."}, []string{"result", "reason"}),
		verification: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "xila_guard_attest_verification_duration_seconds",
			Help: "Time to verify one piece of evidence.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		challenge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "xila_guard_attest_challenge_duration_seconds",
			Help: "Time from a challenge to its NodeSecurityState written, failures included.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		ages: &ageCollector{now: now, observed: map[string]time.Time{}, desc: prometheus.NewDesc("xila_guard_attest_evidence_age_seconds",
			"Age of each node's attested evidence (now less its observedAt), for the nodes the controller attests.", []string{"node"}, nil)},
	}
	for _, c := range []prometheus.Collector{m.attestations, m.verification, m.challenge, m.ages} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) attested(result string, reason guard.Reason) {
	if m == nil {
		return
	}
	label := string(reason)
	if label == "" {
		label = reasonNone
	}
	m.attestations.WithLabelValues(result, label).Inc()
}

func (m *Metrics) verified(d time.Duration) {
	if m != nil {
		m.verification.Observe(d.Seconds())
	}
}

func (m *Metrics) challenged(d time.Duration) {
	if m != nil {
		m.challenge.Observe(d.Seconds())
	}
}

// observed records when node's attested evidence was last observed.
func (m *Metrics) observed(node string, at time.Time) {
	if m != nil {
		m.ages.set(node, at)
	}
}

// forget stops reporting node's evidence age.
func (m *Metrics) forget(node string) {
	if m != nil {
		m.ages.remove(node)
	}
}

// ageCollector reports evidence ages at scrape time, so that evidence no
// one refreshes shows up as growing older.
type ageCollector struct {
	now      func() time.Time
	desc     *prometheus.Desc
	mu       sync.Mutex
	observed map[string]time.Time
}

func (c *ageCollector) set(node string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed[node] = at
}

func (c *ageCollector) remove(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.observed, node)
}

// Describe implements prometheus.Collector.
func (c *ageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *ageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for node, at := range c.observed {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, now.Sub(at).Seconds(), node)
	}
}
