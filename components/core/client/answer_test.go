package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/internal/benchdata"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// withScribble overwrites every answer buffer before it is reused, for the
// length of the test.
func withScribble(t *testing.T) {
	scribble = true
	t.Cleanup(func() { scribble = false })
}

// snapshot is a deep copy of an evaluation's profile, pod verdict and
// results (the first entry stands for the pod, with the profile as its
// incarnation), which shares no memory with it.
func snapshot(t *testing.T, ev *Evaluation) []wire.NodeResult {
	t.Helper()
	type parts struct {
		Profile guard.Profile
		Pod     wire.Verdict
		Results []wire.NodeResult
	}
	data, err := json.Marshal(parts{ev.Profile, ev.Pod, ev.Results})
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.IndexByte(string(data), '#'); i >= 0 {
		t.Fatalf("evaluation reads a recycled buffer: %s", data[max(0, i-40):min(len(data), i+40)])
	}
	var out parts
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return append([]wire.NodeResult{{Node: "(pod)", Decision: out.Pod.Decision, Reasons: out.Pod.Reasons, Message: out.Pod.Message,
		Incarnation: string(out.Profile)}}, out.Results...)
}

// TestAnswersOutliveTheirBuffers keeps evaluations while later calls reuse,
// and overwrite, the buffers they were read into: every string of an
// evaluation, whichever way it was detached, must stay as it was.
func TestAnswersOutliveTheirBuffers(t *testing.T) {
	withScribble(t)
	bodies := []string{
		// In request order, with incarnations: names and incarnations
		// are the request's, decisions and reasons constants, messages
		// shared.
		`{"profile":"production","evaluatedAt":"2026-03-01T12:00:00Z","pod":{"decision":"allow","reasons":[],"message":"pod ok"},` +
			`"results":[{"node":"a","decision":"allow","reasons":[],"message":"same","incarnation":"a-boot-1"},` +
			`{"node":"b","decision":"deny","reasons":["TIME_SLICING_FORBIDDEN"],"message":"same","incarnation":"b-boot-9"}]}`,
		// Out of order, with a reason a newer evaluator may send and a
		// lab profile: names and the unknown reason are copies.
		`{"profile":"lab","evaluatedAt":"2026-03-01T12:00:00Z","pod":{"decision":"allow","reasons":["SOMETHING_NEW"],"message":"pod note"},` +
			`"results":[{"node":"b","decision":"indeterminate","reasons":["SOMETHING_NEW","EVIDENCE_STALE"],"message":"b msg"},` +
			`{"node":"a","decision":"allow","reasons":["SIMULATED_EVIDENCE"],"message":"a msg"}]}`,
		// Something else entirely, to overwrite both.
		`{"profile":"production","evaluatedAt":"2026-03-01T12:00:00Z","pod":{"decision":"deny","reasons":["NO_POLICY"],"message":"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"},` +
			`"results":[{"node":"a","decision":"deny","reasons":["NO_POLICY"],"message":"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"},` +
			`{"node":"b","decision":"deny","reasons":["NO_POLICY"],"message":"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"}]}`,
	}
	var next atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveRaw(http.StatusOK, "application/json", bodies[int(next.Add(1)-1)%len(bodies)])(w, r)
	}))
	req := twoNodeRequest()
	req.Profile = guard.ProfileLab
	req.Nodes[0].State = &v1alpha1.NodeSecurityStateSpec{Incarnation: "a-boot-1"}
	kept := keepEvaluations(t, c, 2*len(bodies), func(int) *wire.EvaluateRequest { return req })
	if got := kept[0].Results[1].Incarnation; got != "b-boot-9" {
		t.Errorf("incarnation not in the request = %q, want b-boot-9", got)
	}
	if r, ok := kept[1].Node("b"); !ok || r.Reasons[0] != "SOMETHING_NEW" {
		t.Errorf("Node(b) = %+v, %v; want the answer's unknown reason", r, ok)
	}
}

// TestLargeAnswersOutliveTheirBuffers does the same with the real server
// and answers long enough to be decoded in two halves.
func TestLargeAnswersOutliveTheirBuffers(t *testing.T) {
	withScribble(t)
	c := realServerClient(t, evaluate.Options{Profile: guard.ProfileLab}, 30*time.Second)
	keepEvaluations(t, c, 4, func(i int) *wire.EvaluateRequest {
		req := benchdata.Request(3000-i*500, 1, time.Now().Add(-time.Duration(i)*time.Second))
		for n := range req.Nodes {
			req.Nodes[n].Name = fmt.Sprintf("call-%d-node-%d", i, n)
		}
		return req
	})
}

// keepEvaluations makes calls evaluations of request(i) in turn, keeping
// each with a deep copy taken when it returned, and fails unless every one
// still equals its copy after the later calls. It returns them.
func keepEvaluations(t *testing.T, c *Client, calls int, request func(i int) *wire.EvaluateRequest) []*Evaluation {
	t.Helper()
	kept := make([]*Evaluation, calls)
	want := make([][]wire.NodeResult, calls)
	for i := range calls {
		ev, err := c.Evaluate(context.Background(), request(i))
		if err != nil {
			t.Fatalf("Evaluate() error = %v", err)
		}
		kept[i], want[i] = ev, snapshot(t, ev)
	}
	for i, ev := range kept {
		if diff := cmp.Diff(want[i], snapshot(t, ev)); diff != "" {
			t.Errorf("evaluation %d changed after later calls (-then +now):\n%s", i, diff)
		}
	}
	return kept
}

// TestRefusedAnswersQuoteIntactText checks that an answer refused after
// its buffer was reused still quotes what the evaluator sent.
func TestRefusedAnswersQuoteIntactText(t *testing.T) {
	withScribble(t)
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
