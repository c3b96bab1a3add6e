package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"

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
	buf := bodyBuffers.Get().(*[]byte)
	defer bodyBuffers.Put(buf)
	body, err := s.readBody(w, r, (*buf)[:0])
	*buf = body[:0]
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
	if err := writeResponse(w, resp); err != nil {
		s.log.Error("writing evaluation", "err", err, "pod", req.Pod.Namespace+"/"+req.Pod.Name)
		return
	}
	s.metrics.observe(resp)
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("evaluated", "pod", req.Pod.Namespace+"/"+req.Pod.Name, "nodes", len(req.Nodes),
			"profile", resp.Profile, "pod_decision", resp.Pod.Decision)
	}
}

// writeResponse writes an answer, encoded into a recycled buffer: the
// answer to thousands of nodes is megabytes, and once written it is no
// longer needed.
func writeResponse(w http.ResponseWriter, resp *wire.EvaluateResponse) error {
	buf := answerBuffers.Get().(*[]byte)
	defer answerBuffers.Put(buf)
	*buf = wire.AppendResponse((*buf)[:0], resp)
	w.Header().Set("Content-Type", wire.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(*buf)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(*buf)
	return err
}

var answerBuffers = sync.Pool{New: func() any { return new([]byte) }}

// bodyBuffers recycles request bodies: a 5,000-node request is megabytes,
// and the decoder copies every string it keeps, so a buffer is free again
// once the request is decoded.
var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// readBody reads the whole body within the size limit into buf, growing
// it as needed, and returns the filled buffer.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, buf []byte) ([]byte, error) {
	limit := s.cfg.MaxRequestBytes
	if r.ContentLength > limit {
		return buf, &http.MaxBytesError{Limit: limit}
	}
	if r.ContentLength > 0 {
		buf = slices.Grow(buf, int(r.ContentLength)+1)
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
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
