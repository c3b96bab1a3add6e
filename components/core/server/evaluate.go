package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/xila-guard/xila-guard/components/core/wire"
)

// evaluate serves POST /v1alpha1/evaluate.
func (s *Server) evaluate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.refuse(w, r, http.StatusMethodNotAllowed, wire.ErrorResponse{
			Message: fmt.Sprintf("method %s is not allowed: use POST", r.Method)})
		return
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		s.refuse(w, r, http.StatusUnsupportedMediaType, wire.ErrorResponse{
			Message: fmt.Sprintf("content type %q is not supported: send %s", ct, wire.ContentType)})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.refuse(w, r, http.StatusRequestEntityTooLarge, wire.ErrorResponse{
				Message: fmt.Sprintf("request body exceeds %d bytes", tooLarge.Limit)})
			return
		}
		s.refuse(w, r, http.StatusBadRequest, wire.ErrorResponse{Message: "reading request body: " + err.Error()})
		return
	}
	req, err := wire.DecodeEvaluateRequest(body, wire.Limits{MaxNodes: s.cfg.MaxNodes})
	if err != nil {
		var bad *wire.RequestError
		if errors.As(err, &bad) {
			s.refuse(w, r, http.StatusBadRequest, bad.Response())
			return
		}
		s.fail(w, r, err)
		return
	}
	resp := s.cfg.Evaluator.Evaluate(req)
	if err := writeJSON(w, http.StatusOK, resp); err != nil {
		s.log.Error("writing evaluation", "err", err, "pod", req.Pod.Namespace+"/"+req.Pod.Name)
		return
	}
	s.metrics.observe(resp)
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("evaluated", "pod", req.Pod.Namespace+"/"+req.Pod.Name, "nodes", len(req.Nodes),
			"profile", resp.Profile, "pod_decision", resp.Pod.Decision)
	}
}

// refuse answers a client error and logs it, so that a misbehaving caller
// can be found from the server's side too.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, code int, body wire.ErrorResponse) {
	s.log.Warn("refused request", "code", code, "method", r.Method, "path", r.URL.Path,
		"remote", r.RemoteAddr, "err", body.Message)
	writeError(w, code, body)
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("failed request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	writeError(w, http.StatusInternalServerError, wire.ErrorResponse{Message: "internal error: " + err.Error()})
}
