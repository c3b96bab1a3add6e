package controller

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus metrics.
type Metrics struct {
	Reconciles       prometheus.Counter
	ReconcileErrors  prometheus.Counter
	PolicyChanges    *prometheus.CounterVec
	PodsManaged      prometheus.Gauge
	PodsWaiting      prometheus.Gauge
	PodsDenyAll      prometheus.Gauge
	InterfacesHeld   prometheus.Gauge
	InterfaceHolds   prometheus.Counter
	DenyAllFallbacks prometheus.Counter
	DataplaneUpdates prometheus.Counter
	Propagation      *prometheus.HistogramVec
}

// PropagationBuckets resolve the 1 s goal finely: 5 ms to 10 s.
var PropagationBuckets = []float64{.005, .01, .025, .05, .075, .1, .15, .2, .3, .4, .5, .75, 1, 1.5, 2, 3, 5, 10}

// NewMetrics creates the metrics and registers them with reg (none when
// reg is nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns = "xila_guard_agent"
	m := &Metrics{
		Reconciles: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "reconciles_total",
			Help: "Reconciles of the node's pods with the dataplane."}),
		ReconcileErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "reconcile_errors_total",
			Help: "Reconciles that failed, in whole or for at least one pod; they are retried."}),
		PolicyChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "policy_changes_total",
			Help: "NetworkPolicy changes seen, by event (add, update, delete)."}, []string{"event"}),
		PodsManaged: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "pods_managed",
			Help: "Local pods whose interface the dataplane enforces."}),
		PodsWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "pods_without_interface",
			Help: "Local pods with an address but no host route to it yet."}),
		PodsDenyAll: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "pods_deny_all",
			Help: "Local pods currently denying all traffic because their policy could not be installed."}),
		InterfacesHeld: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "interfaces_held",
			Help: "Pod interfaces whose pod is not known yet, held at the rules every candidate pod agrees on (deny where they differ)."}),
		InterfaceHolds: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "interface_holds_total",
			Help: "Pod interfaces that were held before their pod was known."}),
		DenyAllFallbacks: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "deny_all_fallbacks_total",
			Help: "Times a pod fell back to deny-all (a new or different error)."}),
		DataplaneUpdates: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "dataplane_updates_total",
			Help: "Per-pod rule switches written to the dataplane."}),
		Propagation: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "propagation_seconds",
			Help:    "From the watch event of a change (NetworkPolicy, Namespace, Pod, Service) to the node's maps switched.",
			Buckets: PropagationBuckets}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.Reconciles, m.ReconcileErrors, m.PolicyChanges, m.PodsManaged, m.PodsWaiting,
			m.PodsDenyAll, m.InterfacesHeld, m.InterfaceHolds, m.DenyAllFallbacks, m.DataplaneUpdates, m.Propagation)
	}
	return m
}
