package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// DefaultMaxResponseBytes bounds the size of an answer; a 10,000-node
// answer is far below it.
const DefaultMaxResponseBytes = 64 << 20

// maxErrorBodyBytes bounds how much of an error answer is read.
const maxErrorBodyBytes = 16 << 10

// Client calls one evaluator. It is safe for concurrent use.
type Client struct {
	endpoint         string
	http             *http.Client
	timeout          time.Duration
	maxResponseBytes int64
	// nodeBytes is the encoded size per node of the last request, to size
	// the next request's buffer in one allocation.
	nodeBytes atomic.Int64
}

// Option configures a Client.
type Option func(*Client)

// WithTimeout bounds every call; the default is guard.DefaultEvalTimeout.
// A deadline on the caller's context still applies when it is sooner.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithHTTPClient sets the HTTP client, e.g. to configure TLS. Its own
// Timeout, if any, applies on top of the call's.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithMaxResponseBytes bounds the size of an answer.
func WithMaxResponseBytes(n int64) Option { return func(c *Client) { c.maxResponseBytes = n } }

// New returns a client for the evaluator at baseURL, such as
// guard.DefaultCoreURL.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("invalid evaluator URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid evaluator URL %q: want http(s)://host[:port]", baseURL)
	}
	c := &Client{
		endpoint:         u.JoinPath(wire.EvaluatePath).String(),
		timeout:          guard.DefaultEvalTimeout,
		maxResponseBytes: DefaultMaxResponseBytes,
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Schedulers call from many goroutines; keep enough idle
		// connections that a burst does not dial afresh.
		t.MaxIdleConnsPerHost = 64
		c.http = &http.Client{Transport: t}
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("evaluator timeout must be positive, got %s", c.timeout)
	}
	return c, nil
}

// Evaluate asks the evaluator about req. It returns an error, never a
// partial answer, unless every requested node has exactly one valid result.
func (c *Client) Evaluate(ctx context.Context, req *wire.EvaluateRequest) (*Evaluation, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	body := c.encode(req)
	answer := answers.Get().(*[]byte)
	err := c.post(ctx, body, answer)
	body.release()
	if err != nil {
		recycleAnswer(answer)
		return nil, err
	}
	// Strict decoding, except that fields added by a newer evaluator are
	// skipped: duplicate keys or a null decision must not slip through.
	data := *answer
	out, err := wire.DecodeEvaluateResponseFor(unsafe.String(unsafe.SliceData(data), len(data)), len(req.Nodes))
	if err != nil {
		// Rare: the buffer is dropped rather than reused, so that nothing
		// the failed decode made can ever see another answer.
		return nil, fmt.Errorf("%w: %w", ErrMalformedResponse, err)
	}
	detach(req, out)
	recycleAnswer(answer)
	return newEvaluation(req, out)
}

// answers are the buffers answers are read into. An answer's decoded
// strings are cut from its buffer, then detached from it before it is
// reused.
var answers = sync.Pool{New: func() any { return new([]byte) }}

// scribble, when a test sets it, overwrites every answer buffer before it
// is reused, so that a string still cut from it shows.
var scribble bool

func recycleAnswer(b *[]byte) {
	if scribble {
		for i := range *b {
			(*b)[i] = '#'
		}
	}
	*b = (*b)[:0]
	answers.Put(b)
}

// encode encodes req into a recycled buffer grown to the size expected
// from the previous request, with a margin: a buffer that falls short by a
// byte is copied whole into one twice its size, which for thousands of
// nodes costs more than encoding.
func (c *Client) encode(req *wire.EvaluateRequest) *requestBody {
	n := len(req.Nodes)
	perNode := int(c.nodeBytes.Load())
	body := newRequestBody()
	body.buf = wire.AppendRequest(slices.Grow(body.buf, 4096+n*perNode+n*perNode/16), req)
	if n >= 16 {
		c.nodeBytes.Store(int64((len(body.buf) + n - 1) / n))
	}
	return body
}

// post sends body and reads the body of a 200 JSON answer into answer;
// every other outcome is an error.
func (c *Client) post(ctx context.Context, body *requestBody, answer *[]byte) error {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, body.reader())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	// The length is known, so the body goes in one piece, not chunked; and
	// a transport that must retry on a fresh connection reads it again.
	hreq.ContentLength = int64(len(body.buf))
	hreq.GetBody = func() (io.ReadCloser, error) { return body.reader(), nil }
	hreq.Header.Set("Content-Type", wire.ContentType)
	hreq.Header.Set("Accept", wire.ContentType)
	resp, err := c.http.Do(hreq)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct != wire.ContentType {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != wire.ContentType {
			return fmt.Errorf("%w: content type %q, want %s", ErrMalformedResponse, ct, wire.ContentType)
		}
	}
	*answer, err = readBody(resp, c.maxResponseBytes, *answer)
	if err != nil {
		return transportError(ctx, err)
	}
	if int64(len(*answer)) > c.maxResponseBytes {
		return fmt.Errorf("%w: answer exceeds %d bytes", ErrMalformedResponse, c.maxResponseBytes)
	}
	return nil
}

// transportError classifies a failed round trip. A deadline, the call's or
// the caller's, is a timeout; everything else means unreachable.
func transportError(ctx context.Context, err error) error {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// readBody reads an answer of at most limit bytes, plus one to tell that
// it was larger, into buf, which it grows as needed; a declared length
// sizes it at once.
func readBody(resp *http.Response, limit int64, buf []byte) ([]byte, error) {
	buf = buf[:0]
	if n := resp.ContentLength; n >= 0 && n <= limit {
		// The transport stops the body at the declared length; the spare
		// bytes take the read that finds the end.
		buf = slices.Grow(buf, int(n)+512)
	}
	r := io.LimitReader(resp.Body, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(32<<10, len(buf)/2))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		}
	}
}

func statusError(resp *http.Response) error {
	se := &StatusError{Code: resp.StatusCode}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
	var body wire.ErrorResponse
	if json.Unmarshal(data, &body) == nil {
		se.Message = body.Message
	}
	return se
}

// checkRequest refuses a request that no answer could match.
func checkRequest(req *wire.EvaluateRequest) error {
	if req == nil {
		return fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	seen := names.Get().(map[string]struct{})
	defer func() {
		clear(seen)
		names.Put(seen)
	}()
	for i := range req.Nodes {
		name := req.Nodes[i].Name
		if name == "" {
			return fmt.Errorf("%w: nodes[%d] has no name", ErrInvalidRequest, i)
		}
		if _, dup := seen[name]; dup {
			return fmt.Errorf("%w: node %q is listed twice", ErrInvalidRequest, name)
		}
		seen[name] = struct{}{}
	}
	return nil
}

// names are the sets checkRequest finds repeated names with.
var names = sync.Pool{New: func() any { return make(map[string]struct{}) }}
