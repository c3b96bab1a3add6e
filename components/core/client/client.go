package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
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
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	answer, err := c.post(ctx, body)
	if err != nil {
		return nil, err
	}
	out, err := wire.DecodeEvaluateResponse(answer)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedResponse, err)
	}
	return newEvaluation(req, out)
}

// post sends body and returns the body of a 200 JSON answer; every other
// outcome is an error.
func (c *Client) post(ctx context.Context, body []byte) ([]byte, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	hreq.Header.Set("Content-Type", wire.ContentType)
	hreq.Header.Set("Accept", wire.ContentType)
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct != wire.ContentType {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != wire.ContentType {
			return nil, fmt.Errorf("%w: content type %q, want %s", ErrMalformedResponse, ct, wire.ContentType)
		}
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, c.maxResponseBytes+1))
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if int64(len(answer)) > c.maxResponseBytes {
		return nil, fmt.Errorf("%w: answer exceeds %d bytes", ErrMalformedResponse, c.maxResponseBytes)
	}
	return answer, nil
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
	seen := make(map[string]struct{}, len(req.Nodes))
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
