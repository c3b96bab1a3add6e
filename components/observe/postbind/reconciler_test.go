package postbind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	coreclient "github.com/xila-guard/xila-guard/components/core/client"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// stubEvaluator answers with whatever the test set last, and remembers the
// request.
type stubEvaluator struct {
	res  wire.NodeResult
	err  error
	last *wire.EvaluateRequest
}

func (s *stubEvaluator) Evaluate(_ context.Context, req *wire.EvaluateRequest) (wire.NodeResult, error) {
	s.last = req
	return s.res, s.err
}

type event struct{ reason, note string }

type fakeRecorder struct{ events []event }

func (f *fakeRecorder) Eventf(_, _ runtime.Object, _, reason, _, note string, args ...any) {
	f.events = append(f.events, event{reason, fmt.Sprintf(note, args...)})
}

func TestReconcile(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{guard.LabelTenant: "acme"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "free"}},
		&v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: "acme"}, Spec: v1alpha1.TenantBindingSpec{
			TenantID: "acme", Namespaces: []string{"team-a"}, EffectivePolicyRef: &v1alpha1.PolicyReference{Name: "strict"}}},
		&v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: "strict"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "n1", Labels: map[string]string{guard.LabelTenantPool: "acme"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "p1"},
			Spec: corev1.PodSpec{NodeName: "gpu-1", SchedulerName: "runai-scheduler"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "free", Name: "web", UID: "p2"}, Spec: corev1.PodSpec{NodeName: "gpu-1"}},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&v1alpha1.TenantBinding{}, indexBindingNamespace, func(o client.Object) []string {
			return o.(*v1alpha1.TenantBinding).Spec.Namespaces
		}).Build()
	ev := &stubEvaluator{}
	rec := &fakeRecorder{}
	var out bytes.Buffer
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	r := &Reconciler{Client: c, Evaluator: ev, Recorder: rec, Sink: NewSink(&out), Clock: clk}
	allow := wire.NodeResult{Node: "gpu-1", Decision: guard.DecisionAllow, Incarnation: "i1"}
	deny := wire.NodeResult{Node: "gpu-1", Decision: guard.DecisionDeny, Reasons: []guard.Reason{"TIME_SLICING_FORBIDDEN"}, Incarnation: "i2", Message: "time-slicing"}

	steps := []struct {
		name       string
		pod        string
		res        wire.NodeResult
		err        error
		wantRecord *Record
		wantEvent  bool
	}{
		{name: "unprotected pod is not evaluated", pod: "free/web"},
		{name: "first allow is silent", pod: "team-a/train", res: allow},
		{name: "same allow again is silent", pod: "team-a/train", res: allow},
		{name: "deny after allow is drift", pod: "team-a/train", res: deny, wantEvent: true,
			wantRecord: &Record{Kind: KindDrift, Decision: guard.DecisionDeny, PreviousDecision: guard.DecisionAllow,
				Reasons: deny.Reasons, Incarnation: "i2", Message: "time-slicing"}},
		{name: "same deny is not repeated", pod: "team-a/train", res: deny},
		{name: "evaluator down is reported as indeterminate", pod: "team-a/train", err: fmt.Errorf("dial: %w", coreclient.ErrUnavailable), wantEvent: true,
			wantRecord: &Record{Kind: KindDrift, Decision: guard.DecisionIndeterminate, PreviousDecision: guard.DecisionDeny,
				Reasons: []guard.Reason{guard.ReasonEvaluatorUnavailable}, Message: "no decision could be obtained: dial: evaluator unavailable"}},
		{name: "recovery is drift without an event", pod: "team-a/train", res: allow,
			wantRecord: &Record{Kind: KindDrift, Decision: guard.DecisionAllow, PreviousDecision: guard.DecisionIndeterminate, Incarnation: "i1"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			out.Reset()
			ev.res, ev.err, ev.last = st.res, st.err, nil
			before := len(rec.events)
			ns, name, _ := strings.Cut(st.pod, "/")
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}); err != nil {
				t.Fatal(err)
			}
			var got *Record
			if out.Len() > 0 {
				got = &Record{}
				if err := json.Unmarshal(out.Bytes(), got); err != nil {
					t.Fatal(err)
				}
			}
			if st.wantRecord != nil {
				w := *st.wantRecord
				w.Time, w.Tenant, w.Namespace, w.Pod, w.Node, w.Scheduler = clk.Now(), "acme", "team-a", "train", "gpu-1", "runai-scheduler"
				st.wantRecord = &w
			}
			if diff := cmp.Diff(st.wantRecord, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if gotEvent := len(rec.events) > before; gotEvent != st.wantEvent {
				t.Errorf("event recorded = %v, want %v (%v)", gotEvent, st.wantEvent, rec.events)
			}
			if st.res.Node != "" || st.err != nil {
				if ev.last == nil || ev.last.Tenant.ID != "acme" || ev.last.Policy.Name != "strict" || ev.last.Nodes[0].Pool != "acme" {
					t.Errorf("request %+v", ev.last)
				}
			} else if ev.last != nil {
				t.Errorf("evaluated %+v", ev.last)
			}
		})
	}
	if e := rec.events[0]; e.reason != guard.EventReasonPolicyViolation || !strings.Contains(e.note, "TIME_SLICING_FORBIDDEN") {
		t.Errorf("event %+v", e)
	}
}

func TestFailure(t *testing.T) {
	for err, want := range map[error]guard.Reason{
		coreclient.ErrTimeout:           guard.ReasonEvaluatorTimeout,
		coreclient.ErrUnavailable:       guard.ReasonEvaluatorUnavailable,
		coreclient.ErrMalformedResponse: guard.ReasonEvaluatorError,
		errors.New("other"):             guard.ReasonEvaluatorError,
	} {
		got := Failure("n", err)
		if got.Decision != guard.DecisionIndeterminate || len(got.Reasons) != 1 || got.Reasons[0] != want {
			t.Errorf("Failure(%v) = %+v, want indeterminate %s", err, got, want)
		}
	}
}
