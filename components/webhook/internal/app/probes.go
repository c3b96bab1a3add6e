package app

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// probes answers the kubelet's probes. The webhook is live as soon as it
// serves, and ready only once its caches have synced and until it begins
// to shut down: before that it would refuse every request.
type probes struct {
	synced   func() bool
	stopping atomic.Bool
}

func (p *probes) register(mux *http.ServeMux, reg *prometheus.Registry) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case p.stopping.Load():
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		case !p.synced():
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ok\n"))
		}
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
}
