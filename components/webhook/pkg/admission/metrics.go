package admission

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Metrics are the webhook's Prometheus metrics. Every label takes values
// from a closed set: operations and resources are those the endpoints
// judge, and reasons are the guard reason codes.
type Metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	badReviews prometheus.Counter
	bindings   *prometheus.CounterVec
}

// NewMetrics registers the webhook's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xila_guard_webhook_requests_total",
			Help: "Admission requests judged, by resource (pods, pods/ephemeralcontainers, pods/binding, nodes, virtualmachineinstancemigrations.kubevirt.io), operation, result (allowed, denied) and reason (the first reason code of a refusal, NONE for an allow).",
		}, []string{"resource", "operation", "result", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "xila_guard_webhook_request_duration_seconds",
			Help: "Time to judge an admission request, from body read to response written, by resource.",
			// From 25µs to about 2.5s.
			Buckets: prometheus.ExponentialBuckets(25e-6, 2.5, 14),
		}, []string{"resource"}),
		badReviews: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xila_guard_webhook_malformed_reviews_total",
			Help: "HTTP requests refused with a 4xx status because they were not a decodable AdmissionReview v1 POST.",
		}),
		bindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xila_guard_webhook_binding_judgements_total",
			Help: "Bindings judged for their node at bind time by the in-process evaluator (judged), and bindings of a report-only binder allowed although they would be refused (reported).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.requests, m.latency, m.badReviews, m.bindings)
	return m
}

func (m *Metrics) observe(resource, operation string, o outcome, d time.Duration) {
	if m == nil {
		return
	}
	result, reason := "allowed", "NONE"
	if !o.allowed() {
		result, reason = "denied", string(o.violations[0].reason)
		if !knownReason(o.violations[0].reason) {
			reason = "OTHER"
		}
	}
	// Reviews come from whoever reaches the port; keep labels to a closed set.
	if !slices.Contains(knownResources, resource) {
		resource = "other"
	}
	if !slices.Contains(knownOperations, operation) {
		operation = "other"
	}
	m.requests.WithLabelValues(resource, operation, result, reason).Inc()
	m.latency.WithLabelValues(resource).Observe(d.Seconds())
}

var (
	knownResources  = []string{"pods", "pods/ephemeralcontainers", "pods/status", "pods/binding", "bindings", "nodes", "virtualmachineinstancemigrations.kubevirt.io"}
	knownOperations = []string{"CREATE", "UPDATE", "DELETE", "CONNECT"}
)

func knownReason(r guard.Reason) bool {
	return r.IsKnown() || slices.Contains(guard.CallerReasons, r) || slices.Contains(guard.AdmissionReasons, r)
}

func (m *Metrics) malformed() {
	if m != nil {
		m.badReviews.Inc()
	}
}

func (m *Metrics) bindEvaluation() {
	if m != nil {
		m.bindings.WithLabelValues("judged").Inc()
	}
}

func (m *Metrics) reportedBinding() {
	if m != nil {
		m.bindings.WithLabelValues("reported").Inc()
	}
}
