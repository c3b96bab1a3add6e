package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"unsafe"

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
	x := s.exchanges.get()
	defer s.exchanges.put(x)
	body, err := s.readBody(w, r, x.body[:0])
	x.body = body[:0]
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
	req, err := x.decoder.Decode(unsafe.String(unsafe.SliceData(body), len(body)), wire.Limits{MaxNodes: s.cfg.MaxNodes})
	if err != nil {
		var bad *wire.RequestError
		if errors.As(err, &bad) {
			s.refuse(w, r, http.StatusBadRequest, bad.Response())
			return
		}
		s.fail(w, r, err)
		return
	}
	s.cfg.Evaluator.EvaluateInto(req, &x.resp)
	if err := x.writeResponse(w); err != nil {
		s.log.Error("writing evaluation", "err", err, "pod", req.Pod.Namespace+"/"+req.Pod.Name)
		return
	}
	s.metrics.observe(&x.resp)
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("evaluated", "pod", req.Pod.Namespace+"/"+req.Pod.Name, "nodes", len(req.Nodes),
			"profile", x.resp.Profile, "pod_decision", x.resp.Pod.Decision)
	}
}

// An exchange holds the memory of one request and its answer: the body,
// the decoded request, the answer and its encoding. A 5,000-node request
// is megabytes in each form; exchanges are recycled so that a busy
// evaluator does not allocate them again for every request, which would
// make the garbage collector, and the first touch of fresh memory, the
// largest part of a large request's cost.
//
// The decoded request's strings are cut from the body without a copy, so
// nothing derived from the request may outlive the handler: the answer is
// encoded and written, metrics are counted from constants and logs are
// formatted before the exchange is put back. Tests then overwrite the body (see
// scribble), so that a reference kept by mistake reads garbage in tests
// instead of another tenant's request in production.
type exchange struct {
	body    []byte
	decoder wire.RequestDecoder
	resp    wire.EvaluateResponse
	answer  []byte
}

// exchanges keeps a few idle exchanges for the next requests. Unlike a
// sync.Pool, it does not drop them at every garbage collection: a large
// request's memory is worth keeping for as long as such requests come.
type exchanges struct {
	idle chan *exchange
}

func newExchanges(n int) exchanges {
	return exchanges{idle: make(chan *exchange, n)}
}

func (e exchanges) get() *exchange {
	select {
	case x := <-e.idle:
		return x
	default:
		return new(exchange)
	}
}

// put makes x ready for the next request and keeps it, unless enough
// exchanges are idle already.
func (e exchanges) put(x *exchange) {
	if scribble {
		b := x.body[:cap(x.body)]
		for i := range b {
			b[i] = '~'
		}
	}
	clear(x.resp.Results)
	x.resp = wire.EvaluateResponse{Results: x.resp.Results[:0]}
	select {
	case e.idle <- x:
	default:
	}
}

// scribble, set by tests, makes put overwrite the body with a byte no
// request contains, so that a string that outlived its request shows.
var scribble bool

// writeResponse encodes the answer into the exchange's buffer and writes it.
func (x *exchange) writeResponse(w http.ResponseWriter) error {
	x.answer = wire.AppendResponse(x.answer[:0], &x.resp)
	w.Header().Set("Content-Type", wire.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(x.answer)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(x.answer)
	return err
}

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
