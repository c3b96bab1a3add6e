package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// requestFor returns the valid request with its nodes renamed after tag,
// so that each answer can be traced to its request.
func requestFor(tag string, nodes int) *wire.EvaluateRequest {
	req := validRequest()
	for len(req.Nodes) < nodes {
		req.Nodes = append(req.Nodes, req.Nodes[0])
	}
	req.Nodes = req.Nodes[:nodes]
	for i := range req.Nodes {
		req.Nodes[i].Name = fmt.Sprintf("%s-%d", tag, i)
	}
	req.Pod.Name = tag
	return req
}

// checkAnswer fails unless body answers req: one result per node, in
// order, with names and messages that belong to this request only.
func checkAnswer(t *testing.T, req *wire.EvaluateRequest, code int, body []byte) {
	t.Helper()
	if code != http.StatusOK {
		t.Fatalf("pod %s: got %d: %s", req.Pod.Name, code, body)
	}
	var resp wire.EvaluateResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("pod %s: %v: %s", req.Pod.Name, err, body)
	}
	if len(resp.Results) != len(req.Nodes) {
		t.Fatalf("pod %s: %d results for %d nodes: %s", req.Pod.Name, len(resp.Results), len(req.Nodes), body)
	}
	for i, r := range resp.Results {
		if r.Node != req.Nodes[i].Name || r.Incarnation != "inc" || r.Message == "" {
			t.Fatalf("pod %s: result %d is %+v, want node %s", req.Pod.Name, i, r, req.Nodes[i].Name)
		}
	}
	if bytes.ContainsRune(body, '~') {
		t.Fatalf("pod %s: the answer holds bytes of a recycled body: %s", req.Pod.Name, body)
	}
}

// TestExchangesDoNotLeakBetweenRequests sends requests of different sizes,
// valid and refused, through one server whose recycled bodies are
// overwritten after every request. An answer, a log line or a metric that
// kept a string of an earlier request would show the overwritten bytes or
// another request's names.
func TestExchangesDoNotLeakBetweenRequests(t *testing.T) {
	scribble = true
	t.Cleanup(func() { scribble = false })
	var logs bytes.Buffer
	s := newTestServer(t, &logs)
	for i, n := range []int{3, 1, 2, 3, 1} {
		req := requestFor(fmt.Sprintf("pod%d", i), n)
		w := do(s, http.MethodPost, "/v1alpha1/evaluate", "application/json", mustJSON(t, req))
		checkAnswer(t, req, w.Code, w.Body.Bytes())

		dup := requestFor(fmt.Sprintf("dup%d", i), 2)
		dup.Nodes[1].Name = dup.Nodes[0].Name
		w = do(s, http.MethodPost, "/v1alpha1/evaluate", "application/json", mustJSON(t, dup))
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `Duplicate value: \"`+dup.Nodes[0].Name+`\"`) {
			t.Fatalf("duplicate node: got %d: %s", w.Code, w.Body)
		}
	}
	metrics := do(s, http.MethodGet, "/metrics", "", "").Body.String()
	for _, text := range []string{logs.String(), metrics} {
		if strings.ContainsRune(text, '~') {
			t.Fatalf("recycled bytes outlived their request:\n%s", text)
		}
	}
	// Ten nodes in all, three of them time-sliced.
	for _, want := range []string{
		`xilaguard_core_decisions_total{decision="allow",reason="NONE"} 7`,
		`xilaguard_core_decisions_total{decision="deny",reason="TIME_SLICING_FORBIDDEN"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestExchangesUnderConcurrency has several clients evaluate their own
// requests at once over HTTP; each must get the answer to its own
// request while exchanges pass between them.
func TestExchangesUnderConcurrency(t *testing.T) {
	scribble = true
	t.Cleanup(func() { scribble = false })
	srv := httptest.NewServer(newTestServer(t, nil))
	defer srv.Close()
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Go(func() {
			for i := range 30 {
				req := requestFor(fmt.Sprintf("c%d-r%d", c, i), 1+(c+i)%3)
				resp, err := srv.Client().Post(srv.URL+wire.EvaluatePath, "application/json", strings.NewReader(mustJSON(t, req)))
				if err != nil {
					t.Error(err)
					return
				}
				var body bytes.Buffer
				_, err = body.ReadFrom(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Error(err)
					return
				}
				checkAnswer(t, req, resp.StatusCode, body.Bytes())
				if !strings.Contains(body.String(), string(guard.ReasonTimeSlicingForbidden)) && len(req.Nodes) > 1 {
					t.Errorf("%s: the time-sliced node was not denied: %s", req.Pod.Name, body.String())
				}
			}
		})
	}
	wg.Wait()
}
