package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

func twoNodeRequest() *wire.EvaluateRequest {
	return &wire.EvaluateRequest{
		Pod:    wire.Pod{Namespace: "acme-ml", Name: "train-0"},
		Tenant: &wire.Tenant{ID: "acme"},
		Nodes:  []wire.Node{{Name: "a", Pool: "acme"}, {Name: "b", Pool: "acme"}},
	}
}

func result(node string, d guard.Decision) wire.NodeResult {
	return wire.NodeResult{Node: node, Decision: d, Reasons: []guard.Reason{}, Message: string(d)}
}

func answer(results ...wire.NodeResult) *wire.EvaluateResponse {
	return &wire.EvaluateResponse{
		Profile: guard.ProfileProduction,
		Pod:     wire.Verdict{Decision: guard.DecisionAllow, Reasons: []guard.Reason{}},
		Results: results,
	}
}

// serveJSON answers every request with body as JSON and the given status.
func serveJSON(code int, body any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	}
}

func serveRaw(code int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

func newTestClient(t *testing.T, h http.Handler, opts ...Option) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEvaluateSucceeds(t *testing.T) {
	var got wire.EvaluateRequest
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1alpha1/evaluate" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("got %s %s with %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		// Out of order on purpose: the client restores request order.
		serveJSON(http.StatusOK, answer(result("b", guard.DecisionDeny), result("a", guard.DecisionAllow)))(w, r)
	})
	c := newTestClient(t, h)
	ev, err := c.Evaluate(context.Background(), twoNodeRequest())
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if diff := cmp.Diff(*twoNodeRequest(), got); diff != "" {
		t.Errorf("server received (-want +got):\n%s", diff)
	}
	want := []wire.NodeResult{result("a", guard.DecisionAllow), result("b", guard.DecisionDeny)}
	if diff := cmp.Diff(want, ev.Results); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if !ev.Allowed("a") || ev.Allowed("b") || ev.Allowed("c") {
		t.Errorf("Allowed(a, b, c) = %v, %v, %v; want true, false, false", ev.Allowed("a"), ev.Allowed("b"), ev.Allowed("c"))
	}
	if _, ok := ev.Node("c"); ok {
		t.Error("Node(c) found a result for a node that was not requested")
	}
}

func TestEvaluateIgnoresFieldsOfNewerEvaluators(t *testing.T) {
	body := `{"profile":"production","evaluatedAt":"2026-03-01T12:00:00Z","future":{"x":[1]},` +
		`"pod":{"decision":"allow","reasons":[],"message":"ok","score":1},` +
		`"results":[{"node":"b","decision":"deny","reasons":["SOMETHING_NEW"],"message":"no","hint":"x"},` +
		`{"node":"a","decision":"allow","reasons":[],"message":"yes"}]}`
	ev, err := newTestClient(t, serveRaw(200, "application/json", body)).Evaluate(context.Background(), twoNodeRequest())
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if !ev.Allowed("a") || ev.Allowed("b") {
		t.Errorf("Allowed(a), Allowed(b) = %v, %v; want true, false", ev.Allowed("a"), ev.Allowed("b"))
	}
}

func TestEvaluateFailsClosed(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body first lets the server notice the client hang up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	})
	cases := []struct {
		name    string
		handler http.Handler
		opts    []Option
		ctx     func() (context.Context, context.CancelFunc)
		req     *wire.EvaluateRequest
		want    error
		wantMsg string
	}{
		{name: "call timeout", handler: slow, opts: []Option{WithTimeout(50 * time.Millisecond)}, want: ErrTimeout},
		{name: "caller deadline", handler: slow, want: ErrTimeout, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}},
		{name: "caller cancels", handler: slow, want: context.Canceled, ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}},
		{name: "server error", handler: serveJSON(500, wire.ErrorResponse{Message: "boom"}), want: ErrStatus, wantMsg: "HTTP 500: boom"},
		{name: "bad request", handler: serveJSON(400, wire.ErrorResponse{Message: "nodes[0].name: Required value"}),
			want: ErrStatus, wantMsg: "HTTP 400: nodes[0].name: Required value"},
		{name: "error without a body", handler: serveRaw(503, "", ""), want: ErrStatus, wantMsg: "HTTP 503"},
		{name: "success status other than 200", handler: serveRaw(204, "", ""), want: ErrStatus},
		{name: "redirect", handler: serveRaw(302, "", ""), want: ErrStatus},
		{name: "not JSON", handler: serveRaw(200, "text/html", "<html>"), want: ErrMalformedResponse, wantMsg: "content type"},
		{name: "no content type", handler: serveRaw(200, "", `{}`), want: ErrMalformedResponse},
		{name: "garbage", handler: serveRaw(200, "application/json", "allow"), want: ErrMalformedResponse},
		{name: "truncated", handler: serveRaw(200, "application/json", `{"profile":"production","results":[`), want: ErrMalformedResponse},
		{name: "empty body", handler: serveRaw(200, "application/json", ""), want: ErrMalformedResponse},
		{name: "too large", handler: serveJSON(200, answer(result("a", guard.DecisionAllow), result("b", guard.DecisionAllow))),
			opts: []Option{WithMaxResponseBytes(64)}, want: ErrMalformedResponse, wantMsg: "exceeds 64 bytes"},
		{name: "result missing", handler: serveJSON(200, answer(result("a", guard.DecisionAllow))),
			want: ErrMalformedResponse, wantMsg: `no result for node "b"`},
		{name: "duplicate key", want: ErrMalformedResponse, wantMsg: "duplicate field",
			handler: serveRaw(200, "application/json", `{"profile":"production","pod":{"decision":"allow","reasons":[],"message":""},`+
				`"results":[{"node":"a","decision":"deny","decision":"allow","reasons":[],"message":""},`+
				`{"node":"b","decision":"deny","reasons":[],"message":""}]}`)},
		{name: "null where a value is required", want: ErrMalformedResponse, wantMsg: `pod decision "" is not allow, deny or indeterminate`,
			handler: serveRaw(200, "application/json", `{"profile":"production","pod":{"decision":null}}`)},
		{name: "no results at all", handler: serveJSON(200, answer()), want: ErrMalformedResponse},
		{name: "duplicate result", handler: serveJSON(200, answer(result("a", guard.DecisionDeny), result("a", guard.DecisionAllow), result("b", guard.DecisionAllow))),
			want: ErrMalformedResponse, wantMsg: `two results for node "a"`},
		{name: "unknown node", handler: serveJSON(200, answer(result("a", guard.DecisionAllow), result("b", guard.DecisionAllow), result("z", guard.DecisionAllow))),
			want: ErrMalformedResponse, wantMsg: `node "z", which was not requested`},
		{name: "unknown decision", handler: serveJSON(200, answer(result("a", "maybe"), result("b", guard.DecisionAllow))),
			want: ErrMalformedResponse, wantMsg: `decision "maybe"`},
		{name: "empty decision", handler: serveJSON(200, answer(result("a", ""), result("b", guard.DecisionAllow))), want: ErrMalformedResponse},
		{name: "decision in the wrong case", handler: serveJSON(200, answer(result("a", "ALLOW"), result("b", guard.DecisionAllow))), want: ErrMalformedResponse},
		{name: "allow although the pod is refused", want: ErrMalformedResponse, handler: serveJSON(200, func() *wire.EvaluateResponse {
			a := answer(result("a", guard.DecisionAllow), result("b", guard.DecisionIndeterminate))
			a.Pod.Decision = guard.DecisionIndeterminate
			return a
		}())},
		{name: "invalid pod decision", want: ErrMalformedResponse, handler: serveJSON(200, func() *wire.EvaluateResponse {
			a := answer(result("a", guard.DecisionDeny), result("b", guard.DecisionDeny))
			a.Pod.Decision = ""
			return a
		}())},
		{name: "unknown profile", want: ErrMalformedResponse, handler: serveJSON(200, func() *wire.EvaluateResponse {
			a := answer(result("a", guard.DecisionAllow), result("b", guard.DecisionAllow))
			a.Profile = "relaxed"
			return a
		}())},
		{name: "lab answer to a production request", want: ErrMalformedResponse,
			req: func() *wire.EvaluateRequest { r := twoNodeRequest(); r.Profile = guard.ProfileProduction; return r }(),
			handler: serveJSON(200, func() *wire.EvaluateResponse {
				a := answer(result("a", guard.DecisionAllow), result("b", guard.DecisionAllow))
				a.Profile = guard.ProfileLab
				return a
			}())},
		{name: "connection dropped mid-answer", want: ErrUnavailable, handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"profile\":")
			_ = buf.Flush()
			conn.Close()
		})},
		{name: "duplicate node names are refused before sending", handler: serveJSON(200, answer()), want: ErrInvalidRequest,
			req: &wire.EvaluateRequest{Nodes: []wire.Node{{Name: "a"}, {Name: "a"}}}},
		{name: "node without a name", handler: serveJSON(200, answer()), want: ErrInvalidRequest,
			req: &wire.EvaluateRequest{Nodes: []wire.Node{{}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, tc.handler, tc.opts...)
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			req := tc.req
			if req == nil {
				req = twoNodeRequest()
			}
			ev, err := c.Evaluate(ctx, req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Evaluate() error = %v, want %v", err, tc.want)
			}
			if ev != nil {
				t.Errorf("Evaluate() returned an evaluation along with error %v", err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
}

func TestEvaluateConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := c.Evaluate(context.Background(), twoNodeRequest())
	if !errors.Is(err, ErrUnavailable) || ev != nil {
		t.Fatalf("Evaluate() = %v, %v; want nil, ErrUnavailable", ev, err)
	}
}

func TestEvaluateNilRequest(t *testing.T) {
	c, err := New(guard.DefaultCoreURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Evaluate(context.Background(), nil); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Evaluate(nil) error = %v, want ErrInvalidRequest", err)
	}
}

func TestStatusError(t *testing.T) {
	err := error(&StatusError{Code: 502, Message: "bad gateway"})
	var se *StatusError
	if !errors.Is(err, ErrStatus) || !errors.As(err, &se) || se.Code != 502 {
		t.Errorf("StatusError does not match ErrStatus or *StatusError: %v", err)
	}
	if errors.Is(err, ErrMalformedResponse) {
		t.Error("StatusError matches ErrMalformedResponse")
	}
}

func TestNew(t *testing.T) {
	cases := []struct {
		name    string
		url     string
		opts    []Option
		want    string
		wantErr bool
	}{
		{name: "default URL", url: guard.DefaultCoreURL, want: "http://127.0.0.1:8080/v1alpha1/evaluate"},
		{name: "base path kept", url: "https://core.xila-guard.svc:8443/guard/", want: "https://core.xila-guard.svc:8443/guard/v1alpha1/evaluate"},
		{name: "no scheme", url: "127.0.0.1:8080", wantErr: true},
		{name: "other scheme", url: "ftp://core", wantErr: true},
		{name: "no host", url: "http://", wantErr: true},
		{name: "unparseable", url: "http://a b/%zz", wantErr: true},
		{name: "zero timeout", url: guard.DefaultCoreURL, opts: []Option{WithTimeout(0)}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.url, tc.opts...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New() error = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && c.endpoint != tc.want {
				t.Errorf("endpoint = %q, want %q", c.endpoint, tc.want)
			}
		})
	}
}

// TestRefusedAnswersQuoteWhatWasSent checks that a refused answer's error
// quotes what the evaluator sent.
func TestRefusedAnswersQuoteWhatWasSent(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"profile":"production","evaluatedAt":"2026-03-01T12:00:00Z","pod":{"decision":"allow","reasons":[],"message":""},` +
			`"results":[{"node":"a","decision":"maybe","reasons":[],"message":""},{"node":"b","decision":"deny","reasons":[],"message":""}]}`,
			`decision "maybe"`},
		{`{"profile":"strict","evaluatedAt":"2026-03-01T12:00:00Z","pod":{"decision":"allow","reasons":[],"message":""},"results":[]}`,
			`profile "strict"`},
		{`{"profile":"production","evaluatedAt":"2026-03-01T12:00:00Z","pod":{"decision":"allow","reasons":[],"message":""},` +
			`"results":[{"node":"zed","decision":"deny","reasons":[],"message":""},{"node":"a","decision":"deny","reasons":[],"message":""}]}`,
			`node "zed"`},
	} {
		c := newTestClient(t, serveRaw(http.StatusOK, "application/json", tc.body))
		_, err := c.Evaluate(context.Background(), twoNodeRequest())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Evaluate() error = %v, want one quoting %s", err, tc.want)
		}
	}
}
