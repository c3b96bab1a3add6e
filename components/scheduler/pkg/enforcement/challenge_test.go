package enforcement

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// attestedAt gives the evidence a Passed verdict reached at t.
func attestedAt(t time.Time) func(*v1alpha1.NodeSecurityStateSpec) {
	return func(s *v1alpha1.NodeSecurityStateSpec) {
		s.TEE = &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP,
			Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, VerifiedAt: metav1.NewTime(t)}}
	}
}

// fakeChallenger stands for the attestation controller: it writes what
// answer makes of the node's evidence into the API server's truth.
type fakeChallenger struct {
	h      *harness
	calls  atomic.Int64
	answer func(node string) (*v1alpha1.NodeSecurityState, error)
}

func (c *fakeChallenger) Challenge(_ context.Context, node string) error {
	c.calls.Add(1)
	s, err := c.answer(node)
	if s != nil {
		c.h.guard.put(s)
	}
	return err
}

// TestPreBindRechallenge: a node whose attestation went stale between
// Filter and PreBind is attested anew and judged on what that wrote; the
// incarnation must not change, a failure refuses, and nothing but the age
// or absence of a verdict leads to a challenge.
func TestPreBindRechallenge(t *testing.T) {
	fresh := func(node string) *v1alpha1.NodeSecurityState {
		return changed(nodeState(poolNode(node, acme), "boot-1"), attestedAt(time.Now()))
	}
	old := func(node string) *v1alpha1.NodeSecurityState {
		return changed(nodeState(poolNode(node, acme), "boot-1"), attestedAt(time.Now().Add(-2*time.Hour)))
	}
	cases := []struct {
		name string
		// truth is the evidence the API server holds at PreBind.
		truth  *v1alpha1.NodeSecurityState
		answer func(node string) (*v1alpha1.NodeSecurityState, error)
		// none: no attestation controller configured.
		none       bool
		bind       want
		challenges int64
	}{{
		name: "stale verdict, the controller attests anew: bound", truth: old("a1"),
		answer: func(n string) (*v1alpha1.NodeSecurityState, error) { return fresh(n), nil },
		bind:   want{}, challenges: 1,
	}, {
		name: "stale verdict, no controller configured: refused", truth: old("a1"), none: true,
		bind: want{fwk.UnschedulableAndUnresolvable, "ATTESTATION_STALE"},
	}, {
		name: "stale verdict, the controller cannot reach the attester: refused", truth: old("a1"),
		answer: func(string) (*v1alpha1.NodeSecurityState, error) {
			return nil, errors.New("502 Bad Gateway: the attester did not answer")
		},
		bind: want{fwk.UnschedulableAndUnresolvable, "ago, more than maxAttestationAge 1h0m0s; re-attesting the node failed: 502 Bad Gateway"}, challenges: 1,
	}, {
		name: "stale verdict, the new attestation fails: refused", truth: old("a1"),
		answer: func(n string) (*v1alpha1.NodeSecurityState, error) {
			s := fresh(n)
			s.Spec.TEE.Attestation.Verdict = v1alpha1.AttestationFailed
			return s, nil
		},
		bind: want{fwk.Unschedulable, "ATTESTATION_FAILED"}, challenges: 1,
	}, {
		name: "stale verdict, the node answers from a new incarnation: refused", truth: old("a1"),
		answer: func(n string) (*v1alpha1.NodeSecurityState, error) {
			s := fresh(n)
			s.Spec.Incarnation = "boot-2"
			return s, nil
		},
		bind: want{fwk.UnschedulableAndUnresolvable, "NODE_CHANGED: the evidence of node a1 changed incarnation after it was judged: boot-1, now boot-2"}, challenges: 1,
	}, {
		name: "stale verdict, the controller answers but writes nothing new: refused", truth: old("a1"),
		answer: func(string) (*v1alpha1.NodeSecurityState, error) { return nil, nil },
		bind:   want{fwk.UnschedulableAndUnresolvable, "ATTESTATION_STALE"}, challenges: 1,
	}, {
		name: "verdict missing: attested anew", truth: changed(fresh("a1"), func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Attestation = nil }),
		answer: func(n string) (*v1alpha1.NodeSecurityState, error) { return fresh(n), nil },
		bind:   want{}, challenges: 1,
	}, {
		name: "refused for time-slicing as well: no challenge", truth: changed(old("a1"), timeSliced),
		answer: func(n string) (*v1alpha1.NodeSecurityState, error) { return fresh(n), nil },
		bind:   want{fwk.Unschedulable, "TIME_SLICING_FORBIDDEN"},
	}, {
		name: "stale but not attested (mock evidence): no challenge", truth: changed(old("a1"), mocked),
		answer: func(n string) (*v1alpha1.NodeSecurityState, error) { return fresh(n), nil },
		bind:   want{fwk.UnschedulableAndUnresolvable, "SOURCE_NOT_ACCEPTED"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := attestedWorld(nil).start(t)
			c := &fakeChallenger{h: h, answer: tc.answer}
			if !tc.none {
				h.pl.challenger = c
			}
			p := pod(acmeNS, "train")
			cy := h.schedule(p)
			if s := cy.filter["a1"]; !s.IsSuccess() {
				t.Fatalf("Filter refused a1: %v", s)
			}
			h.guard.put(tc.truth)
			check(t, "PreBind a1", h.bind(cy, p, "a1"), tc.bind)
			if got := c.calls.Load(); got != tc.challenges {
				t.Errorf("challenged %d times, want %d", got, tc.challenges)
			}
		})
	}
}

// attestedWorld is acme's world under a policy that requires attestation
// no older than an hour, every node attested now and then changed by its
// entry in edit.
func attestedWorld(edit map[string]func(*v1alpha1.NodeSecurityStateSpec)) world {
	w := acmeWorld()
	w.policies[0].Spec.ConfidentialComputing = &v1alpha1.ConfidentialComputingPolicy{
		RequireAttestation: true, MaxAttestationAge: &metav1.Duration{Duration: time.Hour}}
	for i, s := range w.states {
		w.states[i] = changed(s, attestedAt(time.Now()))
		if f := edit[s.Name]; f != nil {
			w.states[i] = changed(w.states[i], f)
		}
	}
	return w
}

// TestFilterLeavesStaleAttestationToPreBind: a node whose attested
// evidence is refused only for its age passes Filter when an attestation
// controller can attest it anew, so that PreBind re-challenges it rather
// than the pod waiting for the next periodic attestation; without a
// controller, or for any other refusal, Filter refuses it.
func TestFilterLeavesStaleAttestationToPreBind(t *testing.T) {
	for _, tc := range []struct {
		name       string
		state      func(*v1alpha1.NodeSecurityStateSpec)
		challenger bool
		want       want
	}{
		{name: "stale, controller configured: passes", state: attestedAt(time.Now().Add(-2 * time.Hour)), challenger: true},
		{name: "stale, no controller: refused", state: attestedAt(time.Now().Add(-2 * time.Hour)),
			want: want{fwk.UnschedulableAndUnresolvable, "ATTESTATION_STALE"}},
		{name: "stale and time-sliced: refused", challenger: true, state: func(s *v1alpha1.NodeSecurityStateSpec) {
			attestedAt(time.Now().Add(-2 * time.Hour))(s)
			timeSliced(s)
		}, want: want{fwk.Unschedulable, "TIME_SLICING_FORBIDDEN"}},
		{name: "stale mock evidence: refused", challenger: true, state: func(s *v1alpha1.NodeSecurityStateSpec) {
			attestedAt(time.Now().Add(-2 * time.Hour))(s)
			mocked(s)
		}, want: want{fwk.UnschedulableAndUnresolvable, "SOURCE_NOT_ACCEPTED"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := attestedWorld(map[string]func(*v1alpha1.NodeSecurityStateSpec){"a1": tc.state}).start(t)
			if tc.challenger {
				h.pl.challenger = &fakeChallenger{h: h}
			}
			cy := h.schedule(pod(acmeNS, "train"))
			check(t, "Filter a1", cy.filter["a1"], tc.want)
		})
	}
}

// TestHTTPChallenger: the client of the controller's challenge endpoint.
func TestHTTPChallenger(t *testing.T) {
	var path atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path.Store(r.Method + " " + r.URL.EscapedPath())
		switch {
		case strings.HasSuffix(r.URL.Path, "/ok"):
			_, _ = w.Write([]byte(`{"node":"ok","verdict":"Failed","reason":"MEASUREMENT_NOT_ALLOWED"}`))
		case strings.HasSuffix(r.URL.Path, "/gone"):
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"message":"the attester of node gone did not answer"}`))
		case strings.HasSuffix(r.URL.Path, "/garbage"):
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("<html>oops</html>"))
		case strings.HasSuffix(r.URL.Path, "/slow"):
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	defer srv.Close()
	c := newHTTPChallenger(srv.URL+"/", 200*time.Millisecond)
	ctx := context.Background()
	if err := c.Challenge(ctx, "ok"); err != nil {
		t.Errorf("200 with a Failed verdict: %v, want nil (the verdict is in the evidence)", err)
	}
	if got := path.Load(); got != "POST /v1/challenge/ok" {
		t.Errorf("request %q, want POST /v1/challenge/ok", got)
	}
	if err := c.Challenge(ctx, "gone"); err == nil || !strings.Contains(err.Error(), "502 Bad Gateway: the attester of node gone did not answer") {
		t.Errorf("502: %v", err)
	}
	if err := c.Challenge(ctx, "garbage"); err == nil || !strings.Contains(err.Error(), "500 Internal Server Error: <html>oops</html>") {
		t.Errorf("500 with a body that is not JSON: %v", err)
	}
	start := time.Now()
	if err := c.Challenge(ctx, "slow"); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow controller: %v, want the deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("slow controller: returned after %s, want about the 200ms timeout", d)
	}
	if err := c.Challenge(ctx, "a/b"); err != nil {
		t.Fatal(err)
	}
	if got := path.Load(); got != "POST /v1/challenge/a%2Fb" {
		t.Errorf("request %q, want the node name escaped", got)
	}
	if err := newHTTPChallenger("http://127.0.0.1:1", time.Second).Challenge(ctx, "x"); err == nil {
		t.Error("unreachable controller: no error")
	}
}
