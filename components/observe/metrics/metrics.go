// Package metrics exposes the observe controller's Prometheus metrics on
// controller-runtime's registry: decisions by reason, drift records,
// evaluation latency and the time of the last successful sync per loop.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Loops whose last successful sync is recorded.
const (
	// LoopEvaluate is post-binding evaluation; it syncs when the evaluator
	// answers.
	LoopEvaluate = "evaluate"
	// LoopPublish is the evidence publisher; it syncs when it writes.
	LoopPublish = "publish"
)

// Metrics implements postbind.Observer and records publisher writes.
type Metrics struct {
	decisions *prometheus.CounterVec
	drift     *prometheus.CounterVec
	latency   prometheus.Histogram
	lastSync  *prometheus.GaugeVec
	labels    *prometheus.CounterVec
	now       func() time.Time
}

// New creates the metrics and registers them with reg; with a nil reg, with
// controller-runtime's registry, which the manager serves.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xila_guard_observe_decisions_total",
			Help: "Post-binding decisions, by decision and reason code (NONE for an allow without notes)."}, []string{"decision", "reason"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xila_guard_observe_drift_records_total",
			Help: "Drift records written, by previous and new decision."}, []string{"from", "to"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "xila_guard_observe_evaluation_duration_seconds",
			Help: "Time to obtain one post-binding decision, failures included.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		lastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "xila_guard_observe_last_successful_sync_timestamp_seconds",
			Help: "Unix time of the last success of each loop: evaluate (evaluator answered) or publish (evidence written)."}, []string{"loop"}),
		labels: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xila_guard_observe_compliance_label_changes_total",
			Help: "Compliance labels added (change=added) or removed (change=removed) on nodes, by policy."}, []string{"policy", "change"}),
		now: time.Now,
	}
	for _, c := range []prometheus.Collector{m.decisions, m.drift, m.latency, m.lastSync, m.labels} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Evaluated records one decision.
func (m *Metrics) Evaluated(res wire.NodeResult, latency time.Duration, answered bool) {
	m.latency.Observe(latency.Seconds())
	if len(res.Reasons) == 0 {
		m.decisions.WithLabelValues(string(res.Decision), "NONE").Inc()
	}
	for _, r := range res.Reasons {
		m.decisions.WithLabelValues(string(res.Decision), string(r)).Inc()
	}
	if answered {
		m.lastSync.WithLabelValues(LoopEvaluate).Set(float64(m.now().Unix()))
	}
}

// Drifted records one drift record.
func (m *Metrics) Drifted(from, to guard.Decision) {
	m.drift.WithLabelValues(string(from), string(to)).Inc()
}

// ComplianceChanged records a compliance label added or removed.
func (m *Metrics) ComplianceChanged(policy string, compliant bool) {
	change := "removed"
	if compliant {
		change = "added"
	}
	m.labels.WithLabelValues(policy, change).Inc()
}

// Published records a successful evidence write.
func (m *Metrics) Published(string) {
	m.lastSync.WithLabelValues(LoopPublish).Set(float64(m.now().Unix()))
}
