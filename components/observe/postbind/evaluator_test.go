package postbind

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	coreclient "github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

func request(observed time.Time) *wire.EvaluateRequest {
	return &wire.EvaluateRequest{
		Pod:    wire.Pod{Namespace: "team-a", Name: "train"},
		Tenant: &wire.Tenant{ID: "acme"},
		Policy: &wire.Policy{Name: "p", Spec: v1alpha1.PlacementPolicySpec{
			Evidence: v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceNFD}}}},
		Nodes: []wire.Node{{Name: "gpu-1", UID: "u", Pool: "acme", State: &v1alpha1.NodeSecurityStateSpec{
			NodeUID: "u", Incarnation: "i", ObservedAt: metav1.NewTime(observed), Source: v1alpha1.SourceNFD, Complete: true}}},
	}
}

func TestLocal(t *testing.T) {
	e, err := evaluate.New(evaluate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		observed time.Time
		want     guard.Decision
		reason   guard.Reason
	}{
		{name: "fresh evidence", observed: time.Now(), want: guard.DecisionAllow},
		{name: "silent publisher", observed: time.Now().Add(-time.Hour), want: guard.DecisionIndeterminate, reason: "EVIDENCE_STALE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Local{Evaluator: e}.Evaluate(context.Background(), request(tc.observed))
			if err != nil {
				t.Fatal(err)
			}
			if res.Decision != tc.want || (tc.reason != "" && (len(res.Reasons) == 0 || res.Reasons[0] != tc.reason)) {
				t.Errorf("got %s %v, want %s %s", res.Decision, res.Reasons, tc.want, tc.reason)
			}
		})
	}
}

func TestRemoteUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	c, err := coreclient.New("http://"+addr, coreclient.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Remote{Client: c}.Evaluate(context.Background(), request(time.Now()))
	if !errors.Is(err, coreclient.ErrUnavailable) {
		t.Fatalf("error %v, want ErrUnavailable", err)
	}
	if got := Failure("gpu-1", err); got.Reasons[0] != guard.ReasonEvaluatorUnavailable {
		t.Errorf("reported as %v", got.Reasons)
	}
}
