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
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	byNode, err := checkRequest(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	body := c.encode(req)
	data, err := c.post(ctx, body)
	body.release()
	if err != nil {
		return nil, err
	}
	// Strict decoding, except that fields added by a newer evaluator are
	// skipped: duplicate keys or a null decision must not slip through.
	out, err := wire.DecodeEvaluateResponseFor(data, len(req.Nodes))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedResponse, err)
	}
	return newEvaluation(req, byNode, out)
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

// post sends body and returns the body of a 200 JSON answer; every other
// outcome is an error.
func (c *Client) post(ctx context.Context, body *requestBody) (string, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, body.reader())
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	// The length is known, so the body goes in one piece, not chunked; and
	// a transport that must retry on a fresh connection reads it again.
	hreq.ContentLength = int64(len(body.buf))
	hreq.GetBody = func() (io.ReadCloser, error) { return body.reader(), nil }
	hreq.Header.Set("Content-Type", wire.ContentType)
	hreq.Header.Set("Accept", wire.ContentType)
	resp, err := c.http.Do(hreq)
	if err != nil {
		return "", transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", statusError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct != wire.ContentType {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != wire.ContentType {
			return "", fmt.Errorf("%w: content type %q, want %s", ErrMalformedResponse, ct, wire.ContentType)
		}
	}
	data, err := readBody(resp, c.maxResponseBytes)
	if err != nil {
		return "", transportError(ctx, err)
	}
	if int64(len(data)) > c.maxResponseBytes {
		return "", fmt.Errorf("%w: answer exceeds %d bytes", ErrMalformedResponse, c.maxResponseBytes)
	}
	return data, nil
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
// it was larger. It reads into a string, which the answer's strings are
// then cut from without a copy of the whole; a declared length sizes it in
// one allocation.
func readBody(resp *http.Response, limit int64) (string, error) {
	var b strings.Builder
	if n := resp.ContentLength; n >= 0 && n <= limit {
		// The transport stops the body at the declared length.
		b.Grow(int(n))
	}
	chunk := chunks.Get().(*[]byte)
	defer chunks.Put(chunk)
	_, err := io.CopyBuffer(&b, io.LimitReader(resp.Body, limit+1), *chunk)
	return b.String(), err
}

// chunks are the buffers answers are read through.
var chunks = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

func statusError(resp *http.Response) error {
	se := &StatusError{Code: resp.StatusCode}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
	var body wire.ErrorResponse
	if json.Unmarshal(data, &body) == nil {
		se.Message = body.Message
	}
	return se
}

// checkRequest refuses a request that no answer could match, and returns
// the index of each node by name.
func checkRequest(req *wire.EvaluateRequest) (map[string]int, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	byNode := make(map[string]int, len(req.Nodes))
	for i := range req.Nodes {
		name := req.Nodes[i].Name
		if name == "" {
			return nil, fmt.Errorf("%w: nodes[%d] has no name", ErrInvalidRequest, i)
		}
		if _, dup := byNode[name]; dup {
			return nil, fmt.Errorf("%w: node %q is listed twice", ErrInvalidRequest, name)
		}
		byNode[name] = i
	}
	return byNode, nil
}
