package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, "gpudevice", "gpuclass")
	if err != nil {
		t.Fatal(err)
	}
	m.DeviceObserved("a/d1", "h100", "Available")
	m.DeviceObserved("a/d2", "h100", "Available")
	m.DeviceObserved("b/d1", "a100", "Invalid")
	m.DeviceObserved("a/d1", "h100", "Held")
	m.DeviceObserved("a/d1", "h100", "Held")
	m.DeviceObserved("b/d1", "a100", "Released")
	m.DeviceGone("b/d1")
	m.DeviceGone("b/never-seen")
	m.ReconcileFailed("gpudevice")
	m.ReconcileFailed("gpudevice")
	want := `
# HELP xila_guard_gpudevices_devices GPUDevices by class and phase, as last judged by this replica.
# TYPE xila_guard_gpudevices_devices gauge
xila_guard_gpudevices_devices{class="h100",phase="Available"} 1
xila_guard_gpudevices_devices{class="h100",phase="Held"} 1
# HELP xila_guard_gpudevices_reconcile_errors_total Reconciles that returned an error, by controller.
# TYPE xila_guard_gpudevices_reconcile_errors_total counter
xila_guard_gpudevices_reconcile_errors_total{controller="gpuclass"} 0
xila_guard_gpudevices_reconcile_errors_total{controller="gpudevice"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestNewTwiceSharesCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	first.ReconcileFailed("gpudevice")
	second.ReconcileFailed("gpudevice")
	want := `
# HELP xila_guard_gpudevices_reconcile_errors_total Reconciles that returned an error, by controller.
# TYPE xila_guard_gpudevices_reconcile_errors_total counter
xila_guard_gpudevices_reconcile_errors_total{controller="gpudevice"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "xila_guard_gpudevices_reconcile_errors_total"); err != nil {
		t.Error(err)
	}
}

func TestNewRefusesAClash(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "xila_guard_gpudevices_devices", Help: "not a gauge vector"}))
	if _, err := New(reg); err == nil {
		t.Error("New registered over a different collector of the same name")
	}
}
