package enforcement

import (
	"errors"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Extension points, as metric labels.
const (
	pointPreFilter = "PreFilter"
	pointFilter    = "Filter"
	pointPreBind   = "PreBind"
)

var (
	evaluationsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "xilaguard", Subsystem: "scheduler", Name: "evaluations_total",
		Help:           "Evaluator calls by extension point and result: ok, timeout, unavailable, error or backoff (not asked while the evaluator recovers).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"point", "result"})

	evaluationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "xilaguard", Subsystem: "scheduler", Name: "evaluation_duration_seconds",
		Help:           "Duration of evaluator calls by extension point, including failed ones.",
		Buckets:        metrics.ExponentialBuckets(0.00025, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"point"})

	refusalsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "xilaguard", Subsystem: "scheduler", Name: "pod_refusals_total",
		Help:           "Pods refused on every node at PreFilter, or refused a bind at PreBind, by the first reason code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"point", "reason"})

	reusedTotal = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "xilaguard", Subsystem: "scheduler", Name: "reused_answers_total",
		Help:           "PreFilter snapshots answered with a recent answer about an identical snapshot instead of an evaluator call.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// registerMetrics adds the plugin's metrics to the scheduler's /metrics.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(evaluationsTotal, evaluationDuration, refusalsTotal, reusedTotal)
	})
}

// callResult labels an evaluator call.
func callResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errBackingOff):
		return "backoff"
	}
	switch failureReason(err) {
	case guard.ReasonEvaluatorTimeout:
		return "timeout"
	case guard.ReasonEvaluatorUnavailable:
		return "unavailable"
	}
	return "error"
}

// countRefusal counts a refusal under its first reason code.
func countRefusal(point string, reasons []guard.Reason) {
	reason := "NONE"
	if len(reasons) > 0 {
		reason = string(reasons[0])
	}
	refusalsTotal.WithLabelValues(point, reason).Inc()
}
