package attester

import (
	"context"
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
	sigsjson "sigs.k8s.io/json"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// DefaultReportTimeout bounds one report request to the backend.
const DefaultReportTimeout = 10 * time.Second

// Config configures a Server.
type Config struct {
	// Backend produces the evidence.
	Backend Backend
	// Logger receives one line per failed request; nil discards.
	Logger *slog.Logger
	// Registry receives the server's metrics and serves /metrics; nil
	// makes a private one.
	Registry *prometheus.Registry
	// ReportTimeout bounds one request to the backend, waiting for an
	// earlier one included; DefaultReportTimeout when zero.
	ReportTimeout time.Duration
}

// Server answers challenges at Path, and serves /healthz, /readyz and
// /metrics. The backend is asked one request at a time: a TEE device
// serves one report request at once, and callers beyond it wait for
// their turn within their report timeout.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	turn    chan struct{}
	ready   atomic.Bool
	answers *prometheus.CounterVec
	latency prometheus.Histogram
}

var _ http.Handler = (*Server)(nil)

// New returns a Server that is not ready until SetReady(true).
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("the attester needs a backend")
	}
	if cfg.ReportTimeout <= 0 {
		cfg.ReportTimeout = DefaultReportTimeout
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), turn: make(chan struct{}, 1),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xila_guard_attest_attester_requests_total",
			Help: "Challenges answered, by HTTP status code."}, []string{"code"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "xila_guard_attest_attester_report_duration_seconds",
			Help: "Time the backend took to produce evidence, failures included.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
	}
	if err := cfg.Registry.Register(s.answers); err != nil {
		return nil, err
	}
	if err := cfg.Registry.Register(s.latency); err != nil {
		return nil, err
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mux.HandleFunc(Path, s.evidence)
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	s.mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	s.mux.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	})
	return s, nil
}

// SetReady sets what /readyz reports.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) evidence(w http.ResponseWriter, r *http.Request) {
	code, msg := s.answer(w, r)
	s.answers.WithLabelValues(strconv.Itoa(code)).Inc()
	if code != http.StatusOK {
		s.log.Warn("challenge refused", "code", code, "message", msg, "remote", r.RemoteAddr)
		writeError(w, code, msg)
	}
}

// answer writes the evidence and returns 200, or returns the status and
// message of a refusal for the caller to write.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) (int, string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return http.StatusMethodNotAllowed, "use POST"
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, "the body must be application/json"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		return http.StatusBadRequest, fmt.Sprintf("reading the request: %v", err)
	}
	if len(body) > MaxRequestBytes {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is larger than %d bytes", MaxRequestBytes)
	}
	var req Request
	if err := decodeStrict(body, &req); err != nil {
		return http.StatusBadRequest, err.Error()
	}
	var devices []v1alpha1.GPUDevice
	if ds, ok := s.cfg.Backend.(DeviceStater); ok && len(req.ReportData) == 0 {
		devices = ds.Devices()
		if err := CheckDevices(devices); err != nil {
			return http.StatusInternalServerError, fmt.Sprintf("%s states devices that cannot be sent: %v", s.cfg.Backend.Name(), err)
		}
	}
	reportData, err := ReportDataOf(&req, devices)
	if err != nil {
		return http.StatusBadRequest, err.Error()
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReportTimeout)
	defer cancel()
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return http.StatusServiceUnavailable, "the TEE is busy with other requests: " + ctx.Err().Error()
	}
	start := time.Now()
	ev, err := s.cfg.Backend.Evidence(ctx, reportData)
	s.latency.Observe(time.Since(start).Seconds())
	<-s.turn
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return http.StatusGatewayTimeout, fmt.Sprintf("%s did not produce evidence within %s", s.cfg.Backend.Name(), s.cfg.ReportTimeout)
		}
		return http.StatusInternalServerError, fmt.Sprintf("%s: %v", s.cfg.Backend.Name(), err)
	}
	out, err := json.Marshal(Response{TEE: ev.TEE, Evidence: ev.Data, EPCSize: ev.EPCSize, Devices: devices})
	if err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(out)
	return http.StatusOK, ""
}

// decodeStrict decodes JSON as the Kubernetes API server does: unknown and
// duplicate fields, names in another case and trailing data are refused.
func decodeStrict(data []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(data, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("decoding the body: %w", err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("decoding the body: %w", errors.Join(strict...))
	}
	return nil
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(ErrorResponse{Message: msg})
}
