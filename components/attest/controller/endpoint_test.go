package controller

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

// blocking answers only when its context ends.
type blocking struct{}

func (blocking) Name() string { return "blocking" }
func (blocking) Evidence(ctx context.Context, _ [nonce.Size]byte) (*attester.Evidence, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestChallengeHandler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		node   string
		method string
		setup  func(g *rig, h *ChallengeHandler)
		code   int
		want   string
	}{
		{name: "passed", node: "node-1", code: 200, want: `"verdict":"Passed"`},
		{name: "failed", node: "node-1", setup: func(g *rig, _ *ChallengeHandler) { g.lab.Measurement[0] ^= 1 }, code: 200,
			want: `"verdict":"Failed","reason":"MEASUREMENT_NOT_ALLOWED"`},
		{name: "no such node", node: "node-9", code: 404, want: "no such node"},
		{name: "no attester", node: "node-1", setup: func(g *rig, _ *ChallengeHandler) {
			if err := g.client.Delete(context.Background(), g.pod); err != nil {
				t.Fatal(err)
			}
		}, code: 409, want: "no ready attester"},
		{name: "unreachable", node: "node-1", setup: func(g *rig, _ *ChallengeHandler) { g.fetcher.err = errors.New("connection refused") },
			code: 502, want: "connection refused"},
		{name: "timeout", node: "node-1", setup: func(g *rig, h *ChallengeHandler) {
			g.fetcher.backend, h.Timeout = blocking{}, 50*time.Millisecond
		}, code: 504, want: "deadline exceeded"},
		{name: "GET", node: "node-1", method: http.MethodGet, code: 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t)
			h := &ChallengeHandler{Reconciler: g.r, Log: logr.Discard()}
			if tc.setup != nil {
				tc.setup(g, h)
			}
			srv := httptest.NewServer(h.Handler())
			defer srv.Close()
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, srv.URL+"/v1/challenge/"+tc.node, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body json.RawMessage
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) {
				t.Errorf("got %d %s, want %d containing %s", resp.StatusCode, body, tc.code, tc.want)
			}
			if tc.code != 200 {
				return
			}
			var got ChallengeResponse
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			nss := g.state()
			if got.NodeUID != nss.Spec.NodeUID || got.Incarnation != nss.Spec.Incarnation || !got.ObservedAt.Equal(&nss.Spec.ObservedAt) {
				t.Errorf("answer %+v does not describe the state written, %+v", got, nss.Spec)
			}
		})
	}
}

// TestChallengeIsFresh: a synchronous challenge challenges again even when
// the evidence is fresh, and the state it returns is the new one.
func TestChallengeIsFresh(t *testing.T) {
	g := newRig(t)
	g.reconcile()
	first := g.state()
	g.clock.SetTime(g.clock.Now().Add(2 * time.Second))
	nss, err := g.r.Challenge(context.Background(), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if g.fetcher.calls.Load() != 2 || !nss.Spec.ObservedAt.After(first.Spec.ObservedAt.Time) ||
		nss.Spec.TEE.Attestation.Verdict != v1alpha1.AttestationPassed {
		t.Errorf("%d challenges; observedAt %s, was %s", g.fetcher.calls.Load(), nss.Spec.ObservedAt, first.Spec.ObservedAt)
	}
}

// TestChallengesOfANodeDoNotOverlap: the periodic and the synchronous
// challenge of one node take turns.
func TestChallengesOfANodeDoNotOverlap(t *testing.T) {
	g := newRig(t)
	unlock, err := g.r.locks.lock(context.Background(), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.r.Challenge(ctx, "node-1"); !errors.Is(err, context.DeadlineExceeded) || g.fetcher.calls.Load() != 0 {
		t.Errorf("challenge while another runs: %v after %d fetches", err, g.fetcher.calls.Load())
	}
	unlock()
	if _, err := g.r.Challenge(context.Background(), "node-1"); err != nil {
		t.Errorf("challenge after the other: %v", err)
	}
}
