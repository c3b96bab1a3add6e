package enforcement

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// Extension points, as metric labels.
const (
	pointPreFilter = "PreFilter"
	pointBind      = "Bind"
)

var (
	evaluationsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "xila_guard", Subsystem: "scheduler", Name: "evaluations_total",
		Help:           "Evaluations by extension point and result: ok, or error (an answer that did not match the request, refused).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"point", "result"})

	evaluationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "xila_guard", Subsystem: "scheduler", Name: "evaluation_duration_seconds",
		Help:           "Duration of evaluations by extension point.",
		Buckets:        metrics.ExponentialBuckets(0.00001, 2, 18),
		StabilityLevel: metrics.ALPHA,
	}, []string{"point"})

	refusalsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "xila_guard", Subsystem: "scheduler", Name: "pod_refusals_total",
		Help:           "Pods refused on every node at PreFilter, or refused a bind at Bind, by the first reason code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"point", "reason"})

	rechallengesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "xila_guard", Subsystem: "scheduler", Name: "rechallenges_total",
		Help:           "Bind-time re-attestations of a node whose attested evidence was too old, by result: ok (the controller wrote fresh evidence) or error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	rechallengeDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "xila_guard", Subsystem: "scheduler", Name: "rechallenge_duration_seconds",
		Help:           "Duration of bind-time re-attestations, from the request to the controller's answer.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})

	evidenceRecordsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "xila_guard", Subsystem: "scheduler", Name: "evidence_records_total",
		Help:           "Bindings of protected pods that carry the guard.xila.us/bound-evidence record, by result: ok, or error (the pod is not bound and is retried).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	reusedTotal = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "xila_guard", Subsystem: "scheduler", Name: "reused_answers_total",
		Help:           "PreFilter snapshots answered with a recent answer about an identical snapshot instead of an evaluator call.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// registerMetrics adds the plugin's metrics to the scheduler's /metrics.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(evaluationsTotal, evaluationDuration, refusalsTotal, reusedTotal, rechallengesTotal, rechallengeDuration, evidenceRecordsTotal)
	})
}

// callResult labels an evaluation.
func callResult(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// countRefusal counts a refusal under its first reason code.
func countRefusal(point string, reasons []guard.Reason) {
	reason := "NONE"
	if len(reasons) > 0 {
		reason = string(reasons[0])
	}
	refusalsTotal.WithLabelValues(point, reason).Inc()
}
