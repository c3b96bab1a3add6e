package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fixedClock struct{}

func (fixedClock) Now() time.Time { return now }

func newTestServer(t *testing.T, logs io.Writer) *Server {
	t.Helper()
	ev, err := evaluate.New(evaluate.Options{Clock: fixedClock{}})
	if err != nil {
		t.Fatal(err)
	}
	if logs == nil {
		logs = io.Discard
	}
	s, err := New(Config{Evaluator: ev, Logger: slog.New(slog.NewJSONHandler(logs, nil)), MaxRequestBytes: 4096, MaxNodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validRequest() *wire.EvaluateRequest {
	state := func(mode v1alpha1.GPUSharingMode) *v1alpha1.NodeSecurityStateSpec {
		return &v1alpha1.NodeSecurityStateSpec{
			NodeUID: "uid", Incarnation: "inc", ObservedAt: metav1.NewTime(now.Add(-time.Minute)),
			Source: v1alpha1.SourceNFD, Complete: true,
			Devices: []v1alpha1.GPUDevice{{ID: "gpu-0", SharingMode: mode}},
		}
	}
	return &wire.EvaluateRequest{
		Pod:    wire.Pod{Namespace: "acme-ml", Name: "train-0"},
		Tenant: &wire.Tenant{ID: "acme"},
		Policy: &wire.Policy{Name: "strict", Spec: v1alpha1.PlacementPolicySpec{
			Evidence:   v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceNFD}},
			GPUSharing: &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}},
		}},
		Nodes: []wire.Node{
			{Name: "good", Pool: "acme", State: state(v1alpha1.SharingExclusive)},
			{Name: "sliced", Pool: "acme", State: state(v1alpha1.SharingTimeSlicing)},
		},
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func do(s http.Handler, method, path, contentType, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func TestEvaluate(t *testing.T) {
	s := newTestServer(t, nil)
	w := do(s, http.MethodPost, "/v1alpha1/evaluate", "application/json; charset=utf-8", mustJSON(t, validRequest()))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %q: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	var resp wire.EvaluateResponse
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	type brief struct {
		Node     string
		Decision guard.Decision
		Reasons  []guard.Reason
	}
	var got []brief
	for _, r := range resp.Results {
		got = append(got, brief{r.Node, r.Decision, r.Reasons})
	}
	want := []brief{
		{"good", guard.DecisionAllow, []guard.Reason{}},
		{"sliced", guard.DecisionDeny, []guard.Reason{guard.ReasonTimeSlicingForbidden}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestEvaluateRefuses(t *testing.T) {
	valid := mustJSON(t, validRequest())
	badTime := strings.Replace(valid, `"observedAt":"2026-03-01T11:59:00Z"`, `"observedAt":"11:59"`, 1)
	fourNodes := func() string {
		r := validRequest()
		r.Nodes = append(r.Nodes, wire.Node{Name: "c"}, wire.Node{Name: "d"})
		return mustJSON(t, r)
	}()
	cases := []struct {
		name        string
		method      string
		contentType string
		body        string
		wantCode    int
		wantMessage string
		wantAllow   string
	}{
		{name: "GET", method: http.MethodGet, wantCode: 405, wantMessage: "method GET is not allowed: use POST", wantAllow: "POST"},
		{name: "PUT", method: http.MethodPut, contentType: "application/json", body: valid, wantCode: 405,
			wantMessage: "method PUT is not allowed: use POST", wantAllow: "POST"},
		{name: "no content type", body: valid, wantCode: 415, wantMessage: `content type "" is not supported: send application/json`},
		{name: "text", contentType: "text/plain", body: valid, wantCode: 415, wantMessage: `content type "text/plain" is not supported`},
		{name: "other charset", contentType: "application/json; charset=latin1", body: valid, wantCode: 415},
		{name: "malformed content type", contentType: "application/json; ;", body: valid, wantCode: 415},
		{name: "too large", contentType: "application/json", body: strings.Repeat(" ", 5000) + valid, wantCode: 413,
			wantMessage: "request body exceeds 4096 bytes"},
		{name: "empty body", contentType: "application/json", wantCode: 400, wantMessage: "malformed JSON at byte 0: unexpected end of JSON input"},
		{name: "not JSON", contentType: "application/json", body: "allow please", wantCode: 400,
			wantMessage: "malformed JSON at byte 1: invalid character 'a' looking for beginning of value"},
		{name: "field-level message", contentType: "application/json", body: badTime, wantCode: 400,
			wantMessage: `nodes[0].state.observedAt: parsing time "11:59"`},
		{name: "unknown field", contentType: "application/json", body: strings.Replace(valid, `"nodes":`, `"node":[],"nodes":`, 1),
			wantCode: 400, wantMessage: "node: unknown field"},
		{name: "trailing data", contentType: "application/json", body: valid + `{}`, wantCode: 400,
			wantMessage: "invalid character '{' after top-level value"},
		{name: "invalid value", contentType: "application/json", body: strings.Replace(valid, `"source":"nfd"`, `"source":"hearsay"`, 1),
			wantCode: 400, wantMessage: `nodes[0].state.source: Unsupported value: "hearsay": supported values: "attested", "nfd", "mock"`},
		{name: "too many nodes", contentType: "application/json", body: fourNodes, wantCode: 400,
			wantMessage: "nodes: Too many: 4: must have at most 3 items"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			var logs bytes.Buffer
			w := do(newTestServer(t, &logs), method, "/v1alpha1/evaluate", tc.contentType, tc.body)
			if w.Code != tc.wantCode {
				t.Fatalf("code = %d, want %d: %s", w.Code, tc.wantCode, w.Body)
			}
			if got := w.Header().Get("Allow"); got != tc.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tc.wantAllow)
			}
			var body wire.ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("error body %q is not JSON: %v", w.Body, err)
			}
			if !strings.Contains(body.Message, tc.wantMessage) {
				t.Errorf("message %q does not contain %q", body.Message, tc.wantMessage)
			}
			if !strings.Contains(logs.String(), `"msg":"refused request"`) {
				t.Errorf("refusal not logged: %s", logs.String())
			}
		})
	}
}

func TestFieldErrorsListed(t *testing.T) {
	r := validRequest()
	r.Nodes[1].State.ObservedAt = metav1.Time{}
	r.Nodes[1].State.Incarnation = ""
	w := do(newTestServer(t, nil), http.MethodPost, "/v1alpha1/evaluate", "application/json", mustJSON(t, r))
	var body wire.ErrorResponse
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	want := wire.ErrorResponse{
		Message: "nodes[1].state.incarnation: Required value; nodes[1].state.observedAt: Required value: the time the evidence was last confirmed",
		Errors: []wire.FieldError{
			{Field: "nodes[1].state.incarnation", Detail: "Required value"},
			{Field: "nodes[1].state.observedAt", Detail: "Required value: the time the evidence was last confirmed"},
		},
	}
	if diff := cmp.Diff(want, body); diff != "" || w.Code != 400 {
		t.Errorf("got %d, body (-want +got):\n%s", w.Code, diff)
	}
}

func TestProbesAndRouting(t *testing.T) {
	s := newTestServer(t, nil)
	check := func(path string, wantCode int, wantBody string) {
		t.Helper()
		w := do(s, http.MethodGet, path, "", "")
		if w.Code != wantCode || !strings.Contains(w.Body.String(), wantBody) {
			t.Errorf("GET %s = %d %q, want %d %q", path, w.Code, w.Body, wantCode, wantBody)
		}
	}
	check("/healthz", 200, "ok")
	check("/readyz", 503, "not ready")
	s.SetReady(true)
	check("/readyz", 200, "ok")
	s.SetReady(false)
	check("/readyz", 503, "not ready")
	check("/nowhere", 404, `"message":"no such endpoint: /nowhere"`)
}

func TestMetrics(t *testing.T) {
	s := newTestServer(t, nil)
	do(s, http.MethodPost, "/v1alpha1/evaluate", "application/json", mustJSON(t, validRequest()))
	do(s, http.MethodPost, "/v1alpha1/evaluate", "application/json", mustJSON(t, validRequest()))
	do(s, http.MethodGet, "/v1alpha1/evaluate", "", "")
	w := do(s, http.MethodGet, "/metrics", "", "")
	for _, want := range []string{
		`xila_guard_core_http_requests_total{code="200",handler="evaluate"} 2`,
		`xila_guard_core_http_requests_total{code="405",handler="evaluate"} 1`,
		`xila_guard_core_http_request_duration_seconds_count{handler="evaluate"} 3`,
		`xila_guard_core_decisions_total{decision="allow",reason="NONE"} 2`,
		`xila_guard_core_decisions_total{decision="deny",reason="TIME_SLICING_FORBIDDEN"} 2`,
		`xila_guard_core_request_nodes_count 2`,
		`go_goroutines`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	ev, _ := evaluate.New(evaluate.Options{})
	if _, err := New(Config{MaxRequestBytes: 1}); err == nil {
		t.Error("New without an evaluator succeeded")
	}
	if _, err := New(Config{Evaluator: ev}); err == nil {
		t.Error("New without a body limit succeeded")
	}
}

// TestBodyLimitOverHTTP checks the limit on a real connection, where a
// chunked body has no declared length.
func TestBodyLimitOverHTTP(t *testing.T) {
	srv := httptest.NewServer(newTestServer(t, nil))
	defer srv.Close()
	body := io.MultiReader(strings.NewReader(strings.Repeat(" ", 8192)), strings.NewReader(mustJSON(t, validRequest())))
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1alpha1/evaluate", body)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || req.ContentLength != 0 {
		t.Errorf("status %d for a chunked body over the limit, want 413", resp.StatusCode)
	}
}
