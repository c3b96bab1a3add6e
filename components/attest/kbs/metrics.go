package kbs

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xila_guard_attest_key_requests_total",
		Help: "Key broker requests by step (auth, attest, resource), result (ok, refused, error) and reason code (NONE without one).",
	}, []string{"step", "result", "reason"})
	releaseDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "xila_guard_attest_key_release_duration_seconds",
		Help:    "Time to judge and answer a resource request, released or refused.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .02, .05, .1, .25, .5, 1},
	})
	sessionsLive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xila_guard_attest_key_sessions",
		Help: "Key broker sessions held, expired ones included until swept.",
	})
)

func init() {
	metrics.Registry.MustRegister(requestsTotal, releaseDuration, sessionsLive)
}
