//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

// lines collects the JSON lines written to a sink.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) records(t *testing.T) []postbind.Record {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []postbind.Record
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		var r postbind.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIntegrationPostBindingAndDrift binds a pod of an external scheduler
// to a compliant pool node, flips the node to time-slicing and expects a
// drift record and an Event; a second pod lands on a non-compliant node
// and is reported after binding.
func TestIntegrationPostBindingAndDrift(t *testing.T) {
	ctx := context.Background()
	eval, err := evaluate.New(evaluate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := &lines{}
	startManager(t, func(mgr ctrl.Manager) error {
		if err := (&evidence.Publisher{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return err
		}
		r := &postbind.Reconciler{Client: mgr.GetClient(), Evaluator: postbind.Local{Evaluator: eval},
			Recorder: mgr.GetEventRecorder("xila-guard-observe"), Sink: postbind.NewSink(out)}
		return r.SetupWithManager(ctx, mgr, 4)
	})
	create(t,
		fixture.MakeNamespace("runai-acme").Tenant("acme").Obj(),
		fixture.MakePlacementPolicy("no-time-slicing", v1alpha1.SourceNFD).ForbidSharing(v1alpha1.SharingTimeSlicing).Obj(),
		fixture.MakeTenantBinding("acme", "runai-acme").Policy("no-time-slicing").Obj(),
	)
	gpu := map[string]string{guard.LabelTenantPool: "acme", evidence.LabelGPUCount: "1", evidence.LabelGPUProduct: "NVIDIA-H100", evidence.LabelSharingStrategy: "none"}
	createNode(t, "acme-good", gpu, "b1")
	shared := map[string]string{guard.LabelTenantPool: "acme", evidence.LabelGPUCount: "1", evidence.LabelSharingStrategy: "time-slicing"}
	createNode(t, "acme-shared", shared, "b1")
	eventually(t, 10*time.Second, func() error {
		for _, n := range []string{"acme-good", "acme-shared"} {
			if _, err := getState(n); err != nil {
				return err
			}
		}
		return nil
	})
	pod := func(name, node string) *corev1.Pod {
		return fixture.MakePod(name, "runai-acme").Scheduler("runai-scheduler").NodeName(node).PoolToleration("acme").Obj()
	}
	create(t, pod("train-0", "acme-good"), pod("train-1", "acme-shared"))

	find := func(pod, kind string) *postbind.Record {
		for _, r := range out.records(t) {
			if r.Pod == pod && r.Kind == kind {
				return &r
			}
		}
		return nil
	}
	t.Run("external pod on a non-compliant node is reported", func(t *testing.T) {
		eventually(t, 10*time.Second, func() error {
			r := find("train-1", postbind.KindViolation)
			if r == nil {
				return fmt.Errorf("no violation record in %q", out.records(t))
			}
			if r.Decision != guard.DecisionDeny || r.Scheduler != "runai-scheduler" || r.Tenant != "acme" || r.Incarnation == "" {
				return fmt.Errorf("record %+v", r)
			}
			return nil
		})
		if r := find("train-0", postbind.KindViolation); r != nil {
			t.Errorf("compliant pod reported: %+v", r)
		}
	})
	t.Run("evidence flipped to time-slicing is drift within 5s", func(t *testing.T) {
		patchNode(t, "acme-good", func(n *corev1.Node) { n.Labels[evidence.LabelSharingStrategy] = "time-slicing" })
		eventually(t, 5*time.Second, func() error {
			r := find("train-0", postbind.KindDrift)
			if r == nil {
				return fmt.Errorf("no drift record")
			}
			if r.PreviousDecision != guard.DecisionAllow || r.Decision != guard.DecisionDeny || !strings.Contains(fmt.Sprint(r.Reasons), "TIME_SLICING") {
				return fmt.Errorf("record %+v", r)
			}
			return nil
		})
		eventually(t, 5*time.Second, func() error {
			var evs eventsv1.EventList
			if err := k8s.List(ctx, &evs, client.InNamespace("runai-acme")); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Regarding.Name == "train-0" && e.Reason == guard.EventReasonPolicyViolation {
					return nil
				}
			}
			return fmt.Errorf("no %s event on train-0 among %d", guard.EventReasonPolicyViolation, len(evs.Items))
		})
	})
	t.Run("policy edit re-evaluates the tenant's pods", func(t *testing.T) {
		p := &v1alpha1.PlacementPolicy{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "no-time-slicing"}, p); err != nil {
			t.Fatal(err)
		}
		p.Spec.GPUSharing = nil
		if err := k8s.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, func() error {
			for _, r := range out.records(t) {
				if r.Pod == "train-1" && r.Kind == postbind.KindDrift && r.Decision == guard.DecisionAllow {
					return nil
				}
			}
			return fmt.Errorf("no drift to allow for train-1")
		})
	})
}
