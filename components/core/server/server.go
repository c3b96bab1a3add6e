package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Config configures a Server.
type Config struct {
	// Evaluator decides requests.
	Evaluator *evaluate.Evaluator
	// Logger receives one line per refused or failed request; nil discards.
	Logger *slog.Logger
	// Registry receives the server's metrics and serves /metrics; nil makes
	// a private one.
	Registry *prometheus.Registry
	// MaxRequestBytes bounds a request body; larger ones get 413.
	MaxRequestBytes int64
	// MaxNodes bounds the nodes of one request; 0 means no limit.
	MaxNodes int
}

// Server serves the evaluator over HTTP.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	ready   atomic.Bool
	mux     *http.ServeMux
}

var _ http.Handler = (*Server)(nil)

// New returns a Server that is not ready until SetReady(true).
func New(cfg Config) (*Server, error) {
	if cfg.Evaluator == nil {
		return nil, errors.New("server needs an evaluator")
	}
	if cfg.MaxRequestBytes <= 0 {
		return nil, fmt.Errorf("max request bytes must be positive, got %d", cfg.MaxRequestBytes)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, metrics: newMetrics(cfg.Registry), mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mux.Handle(wire.EvaluatePath, s.instrument("evaluate", http.HandlerFunc(s.evaluate)))
	s.mux.Handle("/healthz", s.instrument("healthz", http.HandlerFunc(s.healthz)))
	s.mux.Handle("/readyz", s.instrument("readyz", http.HandlerFunc(s.readyz)))
	s.mux.Handle("/metrics", s.instrument("metrics",
		promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)})))
	s.mux.Handle("/", s.instrument("other", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, wire.ErrorResponse{Message: "no such endpoint: " + r.URL.Path})
	})))
	return s, nil
}

// SetReady sets what /readyz reports: ready once serving, not ready while
// shutting down so that traffic drains elsewhere.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !s.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready\n")
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// instrument counts and times every request of a handler.
func (s *Server) instrument(name string, next http.Handler) http.Handler {
	m := s.metrics.forHandler(name)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		m.latency.Observe(time.Since(start).Seconds())
		m.count(sw.code)
	})
}

// statusWriter remembers the status code a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

// WriteHeader records the code and passes it on.
func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func writeJSON(w http.ResponseWriter, code int, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding response: %w", err)
	}
	w.Header().Set("Content-Type", wire.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(code)
	_, err = w.Write(data)
	return err
}

func writeError(w http.ResponseWriter, code int, body wire.ErrorResponse) {
	_ = writeJSON(w, code, body)
}

// isJSON reports whether a Content-Type names JSON in UTF-8.
func isJSON(contentType string) bool {
	if contentType == wire.ContentType {
		// What every caller sends; parsing it would cost allocations.
		return true
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != wire.ContentType {
		return false
	}
	cs, ok := params["charset"]
	return !ok || cs == "utf-8" || cs == "UTF-8"
}
