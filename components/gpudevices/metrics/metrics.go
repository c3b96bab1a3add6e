// Package metrics exposes the GPU controller's Prometheus metrics on
// controller-runtime's registry: devices by class and phase, and reconcile
// errors by controller.
package metrics

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics implements controller.Observer.
type Metrics struct {
	devices *prometheus.GaugeVec
	errors  *prometheus.CounterVec

	mu sync.Mutex
	// known is the class and phase last observed of each device.
	known map[string]series
	// counts is the number of devices of each series.
	counts map[series]int
}

// series is one label set of the devices gauge.
type series struct{ class, phase string }

// New creates the metrics and registers them with reg; with a nil reg, with
// controller-runtime's registry, which the manager serves. Collectors a
// previous New registered with reg are reused, so that the controller can
// run twice in one process. The error counter starts at zero for each of
// controllers.
func New(reg prometheus.Registerer, controllers ...string) (*Metrics, error) {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	m := &Metrics{
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "xila_guard_gpudevices_devices",
			Help: "GPUDevices by class and phase, as last judged by this replica."}, []string{"class", "phase"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xila_guard_gpudevices_reconcile_errors_total",
			Help: "Reconciles that returned an error, by controller."}, []string{"controller"}),
		known:  map[string]series{},
		counts: map[series]int{},
	}
	var err error
	if m.devices, err = register(reg, m.devices); err != nil {
		return nil, err
	}
	if m.errors, err = register(reg, m.errors); err != nil {
		return nil, err
	}
	for _, c := range controllers {
		m.errors.WithLabelValues(c)
	}
	return m, nil
}

// register registers c with reg, or returns the like collector already
// registered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// DeviceObserved records the class and phase of the device of key.
func (m *Metrics) DeviceObserved(key, class, phase string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := series{class: class, phase: phase}
	if old, ok := m.known[key]; ok {
		if old == s {
			return
		}
		m.add(old, -1)
	}
	m.known[key] = s
	m.add(s, 1)
}

// DeviceGone forgets the device of key.
func (m *Metrics) DeviceGone(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.known[key]; ok {
		delete(m.known, key)
		m.add(old, -1)
	}
}

// ReconcileFailed counts a failed reconcile of the named controller.
func (m *Metrics) ReconcileFailed(controller string) {
	m.errors.WithLabelValues(controller).Inc()
}

// add changes the count of a series; a series that falls to zero is
// dropped, so that classes that are gone leave no trace.
func (m *Metrics) add(s series, n int) {
	m.counts[s] += n
	if m.counts[s] <= 0 {
		delete(m.counts, s)
		m.devices.DeleteLabelValues(s.class, s.phase)
		return
	}
	m.devices.WithLabelValues(s.class, s.phase).Set(float64(m.counts[s]))
}
