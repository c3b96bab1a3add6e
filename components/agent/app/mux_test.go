//go:build linux

package app

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type probes struct{ healthy, ready error }

func (p probes) Healthy() error { return p.healthy }
func (p probes) Ready() error   { return p.ready }

func TestProbesAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "xila_guard_agent_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	mux := newMux(reg, probes{ready: errors.New("first reconcile not completed")})
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 503, "/metrics": 200} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s = %d, want %d (%s)", path, rec.Code, want, rec.Body)
		}
		if path == "/metrics" && !strings.Contains(rec.Body.String(), "xila_guard_agent_test_total 1") {
			t.Errorf("/metrics lacks the registered counter:\n%s", rec.Body)
		}
	}
}
