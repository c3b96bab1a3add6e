//go:build integration

package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/policyreport/v1alpha2"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

// reportManager starts a manager with the publisher, post-binding
// evaluation and its policy reports, and returns a function that stops it.
func reportManager(t *testing.T) (stop func()) {
	t.Helper()
	eval, err := evaluate.New(evaluate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlConfig(),
		Cache:      cache.Options{ByObject: map[client.Object]cache.ByObject{&v1alpha2.PolicyReport{}: postbind.PolicyReportCache()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := (&evidence.Publisher{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	r := &postbind.Reconciler{Client: mgr.GetClient(), Evaluator: postbind.Local{Evaluator: eval},
		Recorder: mgr.GetEventRecorder("xila-guard-observe"), Sink: postbind.NewSink(&lines{}),
		Reports: &postbind.PolicyReports{Client: mgr.GetClient(), Settle: 3 * time.Second}}
	if err := r.SetupWithManager(ctx, mgr, 4); err != nil {
		t.Fatal(err)
	}
	if err := r.Reports.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestIntegrationPolicyReports keeps a namespace's PolicyReport against a
// real API server with the wgpolicyk8s.io CRD: one result per bound pod,
// pass or fail, drift told apart, the same after a restart, and gone with
// the pods.
func TestIntegrationPolicyReports(t *testing.T) {
	ctx := context.Background()
	outer := t // what subtests start must outlive them
	t.Run("reports asked for where the cluster serves none fail the start", func(t *testing.T) {
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Controller: ctrlConfig()})
		if err != nil {
			t.Fatal(err)
		}
		err = (&postbind.PolicyReports{Client: mgr.GetClient()}).SetupWithManager(mgr)
		if err == nil || !strings.Contains(err.Error(), "serves no") {
			t.Fatalf("SetupWithManager = %v, want a refusal naming the missing API", err)
		}
	})
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Scheme: scheme,
		Paths: []string{filepath.Join("..", "..", "..", "api", "config", "policyreport-crd")}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}

	const ns = "pr-acme"
	create(t,
		fixture.MakeNamespace(ns).Tenant("pr-acme").Obj(),
		fixture.MakeNamespace("pr-open").Obj(),
		fixture.MakePlacementPolicy("pr-no-time-slicing", v1alpha1.SourceNFD).ForbidSharing(v1alpha1.SharingTimeSlicing).Obj(),
		fixture.MakeTenantBinding("pr-acme", ns).Policy("pr-no-time-slicing").Obj(),
	)
	gpu := func(sharing string) map[string]string {
		return map[string]string{guard.LabelTenantPool: "pr-acme", evidence.LabelGPUCount: "1", evidence.LabelSharingStrategy: sharing}
	}
	createNode(t, "pr-good", gpu("none"), "b1")
	createNode(t, "pr-shared", gpu("time-slicing"), "b1")
	pod := func(namespace, name, node string) *corev1.Pod {
		return fixture.MakePod(name, namespace).Scheduler("volcano").NodeName(node).Obj()
	}
	create(t, pod(ns, "train-0", "pr-good"), pod(ns, "train-1", "pr-shared"), pod("pr-open", "web", "pr-good"))
	stop := reportManager(t)

	getReport := func(namespace string) (*v1alpha2.PolicyReport, error) {
		r := &v1alpha2.PolicyReport{}
		return r, k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: postbind.PolicyReportName}, r)
	}
	// want is pod name → "result/rule".
	expect := func(t *testing.T, timeout time.Duration, want map[string]string) *v1alpha2.PolicyReport {
		t.Helper()
		var last *v1alpha2.PolicyReport
		eventually(t, timeout, func() error {
			r, err := getReport(ns)
			if err != nil {
				return err
			}
			got := map[string]string{}
			for _, res := range r.Results {
				if len(res.Subjects) != 1 || res.Subjects[0].Kind != "Pod" || res.Source != postbind.PolicyReportSource || res.Policy != "pr-no-time-slicing" {
					return fmt.Errorf("result %+v", res)
				}
				got[res.Subjects[0].Name] = string(res.Result) + "/" + res.Rule
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("results %v, want %v", got, want)
			}
			pass, fail := 0, 0
			for _, v := range want {
				if strings.HasPrefix(v, "pass/") {
					pass++
				} else {
					fail++
				}
			}
			if r.Summary.Pass != pass || r.Summary.Fail != fail {
				return fmt.Errorf("summary %+v, want %d pass %d fail", r.Summary, pass, fail)
			}
			last = r
			return nil
		})
		return last
	}

	t.Run("one result per bound pod: pass on the compliant node, fail on the time-sliced one", func(t *testing.T) {
		r := expect(t, 15*time.Second, map[string]string{"train-0": "pass/placement", "train-1": "fail/placement"})
		for _, res := range r.Results {
			if res.Subjects[0].Name == "train-1" && (res.Properties[postbind.PropertyNode] != "pr-shared" ||
				!strings.Contains(res.Properties[postbind.PropertyReasons], string(guard.ReasonTimeSlicingForbidden))) {
				t.Errorf("train-1's result %+v", res)
			}
		}
		if r.Labels["app.kubernetes.io/managed-by"] != "xila-guard-observe" {
			t.Errorf("labels %v", r.Labels)
		}
	})
	t.Run("a namespace that is not protected gets no report", func(t *testing.T) {
		if _, err := getReport("pr-open"); !apierrors.IsNotFound(err) {
			t.Errorf("report in pr-open: %v", err)
		}
	})
	t.Run("evidence flipped under an allowed pod is drift", func(t *testing.T) {
		patchNode(t, "pr-good", func(n *corev1.Node) { n.Labels[evidence.LabelSharingStrategy] = "time-slicing" })
		expect(t, 10*time.Second, map[string]string{"train-0": "fail/drift", "train-1": "fail/placement"})
	})
	t.Run("a restart leaves the report as it was", func(t *testing.T) {
		before, err := getReport(ns)
		if err != nil {
			t.Fatal(err)
		}
		stop()
		stop = reportManager(outer)
		// Long enough for the new controller to settle and write.
		time.Sleep(6 * time.Second)
		after := expect(t, 10*time.Second, map[string]string{"train-0": "fail/drift", "train-1": "fail/placement"})
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("report rewritten by the restart: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
		}
	})
	t.Run("a pod that goes takes its result; the last takes the report", func(t *testing.T) {
		for _, name := range []string{"train-1", "train-0"} {
			if err := k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.GracePeriodSeconds(0)); err != nil {
				t.Fatal(err)
			}
			if name == "train-1" {
				expect(t, 10*time.Second, map[string]string{"train-0": "fail/drift"})
			}
		}
		eventually(t, 10*time.Second, func() error {
			if _, err := getReport(ns); !apierrors.IsNotFound(err) {
				return fmt.Errorf("report still there: %v", err)
			}
			return nil
		})
	})
}
