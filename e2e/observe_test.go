//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/observe/devicetaint"
	"github.com/xila-guard/xila-guard/e2e/lab"
)

// Names the observe test shares with the product (docs/observe.md).
const (
	observeName          = "xila-guard-observe"
	observeLease         = "xila-guard-observe.guard.xila.us"
	observeMetricsPort   = "9090"
	violationEventReason = "GuardPolicyViolation"
	externalScheduler    = "runai-scheduler"
	sharingLabel         = "nvidia.com/gpu.sharing-strategy"
	compliantPoolNode    = 0 // index in workerNames: exclusive GPUs, until the test flips it
	timeSlicedPoolNode   = 1 // time-sliced GPUs from the start
	// driftDeadline is how soon after an evidence change issue 6 wants the
	// Event and the drift record.
	driftDeadline = 5 * time.Second
)

// nfdLabels are GPU operator feature labels of one H100 shared as sharing.
func nfdLabels(sharing string) map[string]string {
	return map[string]string{
		"nvidia.com/gpu.count":   "1",
		"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
		sharingLabel:             sharing,
	}
}

type observedKey struct{}

func observedFrom(ctx context.Context, t *testing.T) *tenantPool {
	return poolFrom(ctx, t, observedKey{})
}

// TestObserve installs the observe controller alone with the chart (no
// controlled scheduler, no webhook: pods land where an external scheduler
// — the test — binds them) and checks what it does in a cluster: pool
// labels become NoSchedule taints, node feature labels become published
// NodeSecurityStates, a pod bound to a non-compliant node is reported after
// binding, a compliant pod whose node's evidence flips to time-slicing is
// reported as drift within 5 s and left running, the metrics count both, one
// of two replicas leads, and only the controller may write evidence.
func TestObserve(t *testing.T) {
	f := features.New("observe controller: evidence, pool taints, post-binding evaluation and drift").
		Setup(installObserve).
		Assess("pool label: NoSchedule taint and published nfd evidence", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			o := observedFrom(ctx, t)
			cs := clientset(t, cfg)
			wantSharing := map[int]string{compliantPoolNode: "Exclusive", timeSlicedPoolNode: "TimeSlicing"}
			for i, w := range o.workers {
				waitPoolTaint(ctx, t, cs, w, o.tenant, true)
				node, err := cs.CoreV1().Nodes().Get(ctx, w, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				s := waitEvidence(ctx, t, cfg, w, func(s *v1alpha1.NodeSecurityStateSpec) bool { return sharing(s) == wantSharing[i] })
				if s.Source != "nfd" || !s.Complete || s.NodeUID != node.UID || s.Incarnation == "" {
					t.Errorf("evidence of %s: source %q complete %v nodeUID %q incarnation %q; want nfd, complete, UID %s, an incarnation",
						w, s.Source, s.Complete, s.NodeUID, s.Incarnation, node.UID)
				}
			}
			return ctx
		}).
		Assess("G-COMPLIANCE-LABELS compliance labels: only the compliant worker is labelled, and a scheduler that honours node affinity places there only", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			o := observedFrom(ctx, t)
			cs := clientset(t, cfg)
			key := complianceLabel(o.tenant)
			waitNodeLabel(ctx, t, cs, o.workers[compliantPoolNode], key, true, time.Minute)
			waitNodeLabel(ctx, t, cs, o.workers[timeSlicedPoolNode], key, false, 0)
			// The stock kube-scheduler stands in for an external scheduler
			// that picks nodes by its own scoring: required node affinity on
			// the label keeps every pod off the time-sliced worker.
			for i := range 4 {
				p := createAffinePod(ctx, t, cs, o.tenant, fmt.Sprintf("affine-%d", i), key)
				if got := waitScheduled(ctx, t, cs, p.Namespace, p.Name); got != o.workers[compliantPoolNode] {
					t.Errorf("pod %s requiring %s was placed on %s, want %s", p.Name, key, got, o.workers[compliantPoolNode])
				}
			}
			waitMetric(ctx, t, cs, `xila_guard_observe_compliance_label_changes_total{change="added",policy="`+o.tenant+`"}`, 0, 30*time.Second)
			return ctx
		}).
		Assess("G-DEVICE-SLICES G-DEVICE-TAINTS a worker publishes a GPU its evidence does not name: tainted, and the taint goes with the device", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			o := observedFrom(ctx, t)
			w := o.workers[compliantPoolNode]
			// A DRA driver publishes its devices with its node's credentials.
			node, err := kubernetes.NewForConfig(impersonatedConfig(cfg, "system:node:"+w, []string{"system:nodes", "system:authenticated"}))
			if err != nil {
				t.Fatal(err)
			}
			s := fixture.MakeResourceSlice(w, "gpu.example.com").GPU("gpu-0", "GPU-unvouched", "Example GPU").Obj()
			if _, err := node.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
				t.Fatalf("the node publishes its device: %v", err)
			}
			cs := clientset(t, cfg)
			defer func() {
				_ = cs.ResourceV1().ResourceSlices().Delete(context.Background(), s.Name, metav1.DeleteOptions{})
			}()
			waitDeviceTaints(ctx, t, cs, w, string(guard.ReasonDeviceEvidenceMissing))
			if err := node.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitDeviceTaints(ctx, t, cs, w)
			return ctx
		}).
		Assess("G-DEVICE-TAINTS real DRA driver: every GPU the evidence does not name is tainted, and kube-scheduler gives none to a claim that does not tolerate the taint", draTaintedNotAllocated).
		Assess("a pod an external scheduler put on a non-compliant node is reported after binding", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			o := observedFrom(ctx, t)
			cs := clientset(t, cfg)
			p := createBoundPod(ctx, t, cs, o.tenant, "external-timesliced", o.workers[timeSlicedPoolNode])
			since := p.CreationTimestamp.Time
			waitViolationEvent(ctx, t, cs, p, "TIME_SLICING_FORBIDDEN", time.Minute)
			r := waitRecord(ctx, t, cs, time.Minute, func(r *reportRecord) bool {
				return r.Pod == p.Name && r.Namespace == p.Namespace && r.Kind == "violation"
			})
			if r.Decision != "deny" || !slices.Contains(r.Reasons, "TIME_SLICING_FORBIDDEN") || r.Tenant != o.tenant ||
				r.Node != o.workers[timeSlicedPoolNode] || r.Scheduler != externalScheduler || r.Incarnation == "" || r.Time.Before(since.Add(-time.Second)) {
				t.Errorf("violation record %+v: want deny with TIME_SLICING_FORBIDDEN for tenant %s on %s by %s, with an incarnation",
					r, o.tenant, o.workers[timeSlicedPoolNode], externalScheduler)
			}
			return ctx
		}).
		Assess("evidence flipped to time-slicing under a running compliant pod: Event and drift line within 5 s, pod left running", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			o := observedFrom(ctx, t)
			cs := clientset(t, cfg)
			node := o.workers[compliantPoolNode]
			const allowed = `xila_guard_observe_decisions_total{decision="allow"`
			allowedBefore, _ := metricSum(ctx, t, cs, allowed)
			p := createBoundPod(ctx, t, cs, o.tenant, "runai-train-0", node)
			waitRunning(ctx, t, cs, p.Namespace, p.Name)
			// Wait until the controller has judged the pod allowed, so that the
			// flip below is a drift and not a first evaluation.
			waitMetric(ctx, t, cs, allowed, allowedBefore, time.Minute)
			time.Sleep(2 * time.Second)
			if ev := violationEvents(ctx, t, cs, p); len(ev) > 0 {
				t.Fatalf("compliant pod %s has %d %s Event(s) before the flip: %s", p.Name, len(ev), violationEventReason, ev[0].Note)
			}

			flipped := time.Now()
			patchNodeLabels(ctx, t, cs, node, map[string]*string{sharingLabel: ptrTo("time-slicing")})
			ev := waitViolationEvent(ctx, t, cs, p, "TIME_SLICING_FORBIDDEN", 30*time.Second)
			r := waitRecord(ctx, t, cs, 30*time.Second, func(r *reportRecord) bool {
				return r.Pod == p.Name && r.Namespace == p.Namespace && r.Kind == "drift" && r.Decision == "deny"
			})
			if r.PreviousDecision != "allow" || !slices.Contains(r.Reasons, "TIME_SLICING_FORBIDDEN") || r.Node != node || r.Scheduler != externalScheduler {
				t.Errorf("drift record %+v: want allow → deny with TIME_SLICING_FORBIDDEN on %s by %s", r, node, externalScheduler)
			}
			recordAfter := r.Time.Sub(flipped)
			eventAfter := ev.EventTime.Sub(flipped)
			t.Logf("evidence flipped on %s: drift record after %s, Event after %s", node, recordAfter, eventAfter)
			if recordAfter > driftDeadline || eventAfter > driftDeadline {
				t.Errorf("drift reported %s (record) and %s (Event) after the evidence changed; want both within %s", recordAfter, eventAfter, driftDeadline)
			}

			// The compliance label goes with the evidence: a pod that requires
			// it now waits rather than land on a forbidden node.
			waitNodeLabel(ctx, t, cs, node, complianceLabel(o.tenant), false, driftDeadline)
			pending := createAffinePod(ctx, t, cs, o.tenant, "affine-after-flip", complianceLabel(o.tenant))
			time.Sleep(3 * time.Second)
			if got, err := cs.CoreV1().Pods(pending.Namespace).Get(ctx, pending.Name, metav1.GetOptions{}); err != nil || got.Spec.NodeName != "" {
				t.Errorf("pod %s requiring %s with no compliant node: node %q (err %v), want it Pending", pending.Name, complianceLabel(o.tenant), got.Spec.NodeName, err)
			}

			// Report-only: the pod keeps running and the node stays schedulable.
			time.Sleep(3 * time.Second)
			got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.DeletionTimestamp != nil || got.Status.Phase != corev1.PodRunning {
				t.Errorf("pod %s after the drift: %v (err %v); want it left running", p.Name, lab.DescribeStatus(got), err)
			}
			if n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
				t.Errorf("node %s after the drift: unschedulable %v (err %v); want it left alone", node, n != nil && n.Spec.Unschedulable, err)
			}
			return ctx
		}).
		Assess("status, PolicyReports and kubectl xila-guard tell the state", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			o := observedFrom(ctx, t)
			dyn := dynamicClientFor(t, cfg)
			shared, flipped := o.workers[timeSlicedPoolNode], o.workers[compliantPoolNode]
			// The printer columns read these: never blank while healthy.
			waitFor(ctx, t, 30*time.Second, func() error {
				b, err := dyn.Resource(lab.Bindings).Get(ctx, o.tenant, metav1.GetOptions{})
				if err != nil {
					return err
				}
				count, _, _ := unstructured.NestedInt64(b.Object, "status", "poolNodeCount")
				policy, _, _ := unstructured.NestedString(b.Object, "status", "policy")
				if count != 2 || policy != o.tenant || readyOf(b) != "True" {
					return fmt.Errorf("TenantBinding %s status %v", o.tenant, b.Object["status"])
				}
				p, err := dyn.Resource(lab.Policies).Get(ctx, o.tenant, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if n, _, _ := unstructured.NestedInt64(p.Object, "status", "bindings"); n != 1 || readyOf(p) != "True" {
					return fmt.Errorf("PlacementPolicy %s status %v", o.tenant, p.Object["status"])
				}
				st, err := dyn.Resource(lab.States).Get(ctx, shared, metav1.GetOptions{})
				if err != nil {
					return err
				}
				d, _, _ := unstructured.NestedString(st.Object, "status", "evaluation", "decision")
				reasons, _, _ := unstructured.NestedStringSlice(st.Object, "status", "evaluation", "reasons")
				if d != "deny" || !slices.Contains(reasons, "TIME_SLICING_FORBIDDEN") || readyOf(st) != "True" {
					return fmt.Errorf("NodeSecurityState %s status %v", shared, st.Object["status"])
				}
				return nil
			})
			c, err := lab.NewCluster(cfg.KubeconfigFile(), suite.BinDir, suite.RepoRoot, suite.ImageTag, suite.Agnhost)
			if err != nil {
				t.Fatal(err)
			}
			// Violations as PolicyReports: the pod placed on the time-sliced
			// node fails its placement, the one whose node flipped drifted.
			waitFor(ctx, t, time.Minute, func() error {
				out, err := exec.CommandContext(ctx, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(),
					"get", "policyreport", "-n", o.tenant, "xila-guard", "-o",
					`jsonpath={range .results[*]}{.resources[0].name}={.result}/{.rule}{"\n"}{end}`).CombinedOutput()
				if err != nil {
					return fmt.Errorf("kubectl get policyreport: %v: %s", err, out)
				}
				for _, want := range []string{"external-timesliced=fail/placement", "runai-train-0=fail/drift"} {
					if !strings.Contains(string(out), want) {
						return fmt.Errorf("PolicyReport results %q lack %s", out, want)
					}
				}
				return nil
			})
			// Why is runai-train-0 where it is? Drift, on its own node only.
			out, code, err := c.Plugin(ctx, "explain", "pod", o.tenant+"/runai-train-0")
			if err != nil {
				t.Fatal(err)
			}
			if f := lab.PluginLine(out, flipped); code != 1 || len(f) < 4 || f[2] != "deny" || f[3] != "TIME_SLICING_FORBIDDEN" ||
				!strings.Contains(out, "Drift: the pod runs on "+flipped) || lab.PluginLine(out, shared) != nil {
				t.Errorf("kubectl xila-guard explain pod runai-train-0 (exit %d):\n%s", code, out)
			}
			// The pod waiting for a compliant node: every node refused, each
			// with its reason.
			out, code, err = c.Plugin(ctx, "explain", "pod", "-n", o.tenant, "affine-after-flip")
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range o.workers {
				if f := lab.PluginLine(out, w); len(f) < 4 || f[2] != "deny" || f[3] != "TIME_SLICING_FORBIDDEN" {
					t.Errorf("kubectl xila-guard explain pod affine-after-flip: node %s %v, want deny TIME_SLICING_FORBIDDEN:\n%s", w, f, out)
				}
			}
			if code != 1 || !strings.Contains(out, "Xila Guard refuses every node") {
				t.Errorf("kubectl xila-guard explain pod affine-after-flip (exit %d):\n%s", code, out)
			}
			// Health in one command.
			out, _, err = c.Plugin(ctx, "status")
			if err != nil {
				t.Fatal(err)
			}
			if f := lab.PluginLine(out, "deployment/"+observeName); len(f) < 3 || f[1] != "2/2" || f[2] != suite.ImageTag {
				t.Errorf("kubectl xila-guard status: %s %v, want 2/2 ready at %s:\n%s", observeName, f, suite.ImageTag, out)
			}
			if f := lab.PluginLine(out, o.tenant); len(f) < 3 || f[1] != "2" || f[2] != "2" {
				t.Errorf("kubectl xila-guard status: pool %s %v, want 2 states, 2 ready:\n%s", o.tenant, f, out)
			}
			var violations int
			for _, line := range strings.Split(out, "\n") {
				if _, n, ok := strings.Cut(line, "Violations in the last 1h0m0s: "); ok {
					violations, _ = strconv.Atoi(n)
				}
			}
			if !strings.Contains(out, "Evaluator: in-process") || violations < 2 || !strings.Contains(out, "PolicyReports: ") {
				t.Errorf("kubectl xila-guard status: want the in-process evaluator, at least this test's 2 violations and the reports:\n%s", out)
			}
			return ctx
		}).
		Assess("metrics count decisions and drift; one replica leads", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cs := clientset(t, cfg)
			for _, m := range []string{
				`xila_guard_observe_decisions_total{decision="deny",reason="TIME_SLICING_FORBIDDEN"}`,
				`xila_guard_observe_drift_records_total{from="allow",to="deny"}`,
				`xila_guard_observe_last_successful_sync_timestamp_seconds{loop="evaluate"}`,
				`xila_guard_observe_last_successful_sync_timestamp_seconds{loop="publish"}`,
			} {
				waitMetric(ctx, t, cs, m, 0, 30*time.Second)
			}
			pods := observePods(ctx, t, cs)
			if len(pods) != 2 {
				t.Errorf("%d %s pods, want 2", len(pods), observeName)
			}
			return ctx
		}).
		Assess("only the controller's service account may write NodeSecurityState", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			o := observedFrom(ctx, t)
			cs := clientset(t, cfg)
			for _, c := range []struct {
				user string
				verb string
				want bool
			}{
				{"system:serviceaccount:" + lab.PlatformNamespace + ":" + observeName, "create", true},
				{"system:serviceaccount:" + lab.PlatformNamespace + ":" + observeName, "update", true},
				{"system:serviceaccount:" + o.tenant + ":default", "create", false},
				{"system:serviceaccount:" + o.tenant + ":default", "update", false},
				{"system:serviceaccount:" + lab.PlatformNamespace + ":default", "update", false},
			} {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: c.user, ResourceAttributes: &authorizationv1.ResourceAttributes{
						Group: lab.Group, Resource: "nodesecuritystates", Verb: c.verb, Name: o.workers[0]},
				}}
				got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("SubjectAccessReview: %v", err)
				}
				if got.Status.Allowed != c.want {
					t.Errorf("%s may %s nodesecuritystates: %v, want %v", c.user, c.verb, got.Status.Allowed, c.want)
				}
			}
			return ctx
		}).
		Assess("pool label removed: taint and evidence go", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			o := observedFrom(ctx, t)
			cs := clientset(t, cfg)
			w := o.workers[timeSlicedPoolNode]
			patchNodeLabels(ctx, t, cs, w, map[string]*string{lab.PoolLabel: nil})
			waitPoolTaint(ctx, t, cs, w, o.tenant, false)
			waitEvidenceGone(ctx, t, cfg, w)
			return ctx
		}).
		Teardown(uninstallObserve).
		Feature()
	testenv.Test(t, f)
}

// installObserve installs the CRDs and the chart with only the observe
// controller, and makes both workers the pool of a new tenant whose policy
// accepts nfd evidence and forbids time-slicing: the first worker with
// exclusive GPUs, the second time-sliced. It labels the workers only: the
// controller is what taints them and publishes their evidence.
func installObserve(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	cs := clientset(t, cfg)
	if err := labCluster(t, cfg).ApplyCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	installChart(ctx, t, cfg, []string{"observe-values.yaml"})

	o := &tenantPool{tenant: envconf.RandomName("xg-observed", 16), workers: twoWorkers(ctx, t, cs)}
	ctx = context.WithValue(ctx, observedKey{}, o)
	createPoolTenant(ctx, t, cfg, o.tenant, v1alpha1.SourceNFD)
	for i, w := range o.workers {
		sharing := "none"
		if i == timeSlicedPoolNode {
			sharing = "time-slicing"
		}
		labels := map[string]*string{lab.PoolLabel: ptrTo(o.tenant)}
		for k, v := range nfdLabels(sharing) {
			labels[k] = ptrTo(v)
		}
		patchNodeLabels(ctx, t, cs, w, labels)
	}
	return ctx
}

// uninstallObserve deletes the tenant's pods, takes the workers out of the
// pool while the controller still runs (so that it removes their taints
// and evidence), and uninstalls the chart, waiting for its pods to go.
func uninstallObserve(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	o, _ := ctx.Value(observedKey{}).(*tenantPool)
	if o == nil {
		return ctx
	}
	cs := clientset(t, cfg)
	dyn := dynamicClientFor(t, cfg)
	zero := int64(0)
	_ = cs.CoreV1().Pods(o.tenant).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	remove := map[string]*string{lab.PoolLabel: nil, complianceLabel(o.tenant): nil}
	for k := range nfdLabels("") {
		remove[k] = nil
	}
	for _, w := range o.workers {
		patchNodeLabels(ctx, t, cs, w, remove)
	}
	for _, w := range o.workers {
		waitPoolTaint(ctx, t, cs, w, o.tenant, false)
		_ = dyn.Resource(lab.States).Delete(ctx, w, metav1.DeleteOptions{})
	}
	_ = dyn.Resource(lab.Bindings).Delete(ctx, o.tenant, metav1.DeleteOptions{})
	_ = dyn.Resource(lab.Policies).Delete(ctx, o.tenant, metav1.DeleteOptions{})
	if err := cs.CoreV1().Namespaces().Delete(ctx, o.tenant, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting namespace %s: %v", o.tenant, err)
	}
	uninstallChart(ctx, t, cfg)
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(observePods(ctx, t, cs)) == 0, nil
	})
	if err != nil {
		t.Errorf("%s pods still there after uninstall: %v", observeName, err)
	}
	return ctx
}

// createBoundPod creates a run:ai-shaped pod for an external scheduler and
// binds it to node, as that scheduler would. It tolerates the pool taint,
// as a pod placed by an orchestrator for the pool's tenant would.
func createBoundPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name, node string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"runai/queue": "team-a"}},
		Spec: corev1.PodSpec{
			SchedulerName: externalScheduler,
			Tolerations:   []corev1.Toleration{{Key: lab.PoolLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name: "pause", Image: suite.Agnhost, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
			}},
		},
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, UID: created.UID}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := cs.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding pod %s/%s to %s: %v", ns, name, node, err)
	}
	return created
}

// complianceLabel is the observe controller's compliance label of a
// policy (docs/observe.md).
func complianceLabel(policy string) string { return "compliance.guard.xila.us/" + policy }

// createAffinePod creates a pod of the default scheduler that tolerates
// its tenant's pool and requires the compliance label key=true in its node
// affinity, as the docs tell tenants of an external scheduler to.
func createAffinePod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name, key string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Key: lab.PoolLabel, Operator: corev1.TolerationOpEqual, Value: ns, Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}}}}},
			Containers: []corev1.Container{{
				Name: "pause", Image: suite.Agnhost, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
			}},
		},
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return created
}

// waitScheduled waits until the pod is bound and returns its node.
func waitScheduled(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	var node string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not scheduled: %v", ns, name, err)
	}
	return node
}

// waitNodeLabel waits until the node carries key=true (want) or lacks key;
// a zero timeout checks once.
func waitNodeLabel(ctx context.Context, t *testing.T, cs kubernetes.Interface, node, key string, want bool, timeout time.Duration) {
	t.Helper()
	var labels map[string]string
	check := func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		labels = n.Labels
		return (n.Labels[key] == "true") == want, nil
	}
	ok, err := check(ctx)
	if !ok && err == nil && timeout > 0 {
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, false, check)
	} else if !ok && err == nil {
		err = fmt.Errorf("not as wanted")
	}
	if err != nil {
		t.Fatalf("node %s: label %s=%q after %s, want present %v", node, key, labels[key], timeout, want)
	}
}

// patchNodeLabels sets (or, for nil, removes) labels of a node.
func patchNodeLabels(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string, labels map[string]*string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling node %s: %v", node, err)
	}
}

// waitPoolTaint waits until node carries exactly the NoSchedule pool taint
// of pool (want) or no NoSchedule pool taint at all (!want).
func waitPoolTaint(ctx context.Context, t *testing.T, cs kubernetes.Interface, node, pool string, want bool) {
	t.Helper()
	var taints []corev1.Taint
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		taints = n.Spec.Taints
		var found []string
		for _, taint := range taints {
			if taint.Key == lab.PoolLabel && taint.Effect == corev1.TaintEffectNoSchedule {
				found = append(found, taint.Value)
			}
		}
		if want {
			return len(found) == 1 && found[0] == pool, nil
		}
		return len(found) == 0, nil
	})
	if err != nil {
		t.Errorf("node %s: want pool taint %s=%s:NoSchedule present %v, taints %v: %v", node, lab.PoolLabel, pool, want, taints, err)
	}
}

// sharing is the sharing mode of the node's devices when they agree.
func sharing(s *v1alpha1.NodeSecurityStateSpec) string {
	var mode v1alpha1.GPUSharingMode
	for i, d := range s.Devices {
		if i > 0 && d.SharingMode != mode {
			return "mixed"
		}
		mode = d.SharingMode
	}
	return string(mode)
}

// waitEvidence waits until the node's NodeSecurityState satisfies ok.
func waitEvidence(ctx context.Context, t *testing.T, cfg *envconf.Config, node string, ok func(*v1alpha1.NodeSecurityStateSpec) bool) *v1alpha1.NodeSecurityStateSpec {
	t.Helper()
	dyn := dynamicClientFor(t, cfg)
	var last *v1alpha1.NodeSecurityStateSpec
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(lab.States).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		state := &v1alpha1.NodeSecurityState{}
		if err := fixture.FromUnstructured(u, state); err != nil {
			return false, err
		}
		last = &state.Spec
		return ok(last), nil
	})
	if err != nil {
		t.Fatalf("NodeSecurityState %s: %v (last seen %+v)", node, err, last)
	}
	return last
}

func waitEvidenceGone(ctx context.Context, t *testing.T, cfg *envconf.Config, node string) {
	t.Helper()
	dyn := dynamicClientFor(t, cfg)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(lab.States).Get(ctx, node, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("NodeSecurityState %s still there after its node left the pool: %v", node, err)
	}
}

// violationEvents lists the GuardPolicyViolation Events regarding the pod.
func violationEvents(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod) []eventSummary {
	t.Helper()
	list, err := cs.EventsV1().Events(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing events of %s: %v", p.Namespace, err)
	}
	var out []eventSummary
	for _, e := range list.Items {
		if e.Regarding.Name == p.Name && e.Regarding.UID == p.UID && e.Reason == violationEventReason {
			at := e.EventTime.Time
			if at.IsZero() {
				at = e.DeprecatedLastTimestamp.Time
			}
			out = append(out, eventSummary{Note: e.Note, Type: e.Type, EventTime: at})
		}
	}
	return out
}

type eventSummary struct {
	Note, Type string
	EventTime  time.Time
}

// waitViolationEvent waits for a Warning GuardPolicyViolation Event on the
// pod whose note names reason, and returns the first such.
func waitViolationEvent(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod, reason string, timeout time.Duration) eventSummary {
	t.Helper()
	var found eventSummary
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, e := range violationEvents(ctx, t, cs, p) {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, reason) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: no Warning %s Event naming %s within %s: %v", p.Namespace, p.Name, violationEventReason, reason, timeout, err)
	}
	return found
}

// reportRecord is one JSON line of the controller's report (docs/observe.md).
type reportRecord struct {
	Time             time.Time `json:"time"`
	Kind             string    `json:"kind"`
	Tenant           string    `json:"tenant"`
	Namespace        string    `json:"namespace"`
	Pod              string    `json:"pod"`
	Node             string    `json:"node"`
	Scheduler        string    `json:"scheduler"`
	Decision         string    `json:"decision"`
	PreviousDecision string    `json:"previousDecision"`
	Reasons          []string  `json:"reasons"`
	Incarnation      string    `json:"incarnation"`
}

// waitRecord waits until a replica's stdout has a report line matching ok.
func waitRecord(ctx context.Context, t *testing.T, cs kubernetes.Interface, timeout time.Duration, ok func(*reportRecord) bool) *reportRecord {
	t.Helper()
	var found *reportRecord
	seen := 0
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		seen = 0
		for _, p := range observePods(ctx, t, cs) {
			logs, err := cs.CoreV1().Pods(lab.PlatformNamespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "observe"}).DoRaw(ctx)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(bytes.NewReader(logs))
			sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
			for sc.Scan() {
				var r reportRecord
				if json.Unmarshal(sc.Bytes(), &r) != nil || r.Kind == "" {
					continue
				}
				seen++
				if ok(&r) {
					found = &r
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no matching report line within %s (%d report lines seen): %v", timeout, seen, err)
	}
	return found
}

// observePods lists the controller's pods.
func observePods(ctx context.Context, t *testing.T, cs kubernetes.Interface) []corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(lab.PlatformNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + observeName})
	if err != nil {
		t.Fatalf("listing %s pods: %v", observeName, err)
	}
	return pods.Items
}

// leader returns the pod that holds the controller's Lease.
func leader(ctx context.Context, t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	var holder string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(lab.PlatformNamespace).Get(ctx, observeLease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *l.Spec.HolderIdentity
		for _, p := range observePods(ctx, t, cs) {
			if strings.HasPrefix(holder, p.Name+"_") {
				holder = p.Name
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Lease %s/%s: holder %q is none of the %s pods: %v", lab.PlatformNamespace, observeLease, holder, observeName, err)
	}
	return holder
}

// metricSum reads the leader's /metrics and returns the sum of the samples
// whose name and labels start with prefix; a prefix that ends with "}"
// matches that label set exactly. ok is false when none matched.
func metricSum(ctx context.Context, t *testing.T, cs kubernetes.Interface, prefix string) (sum float64, ok bool) {
	t.Helper()
	body, err := cs.CoreV1().Pods(lab.PlatformNamespace).ProxyGet("http", leader(ctx, t, cs), observeMetricsPort, "/metrics", nil).DoRaw(ctx)
	if err != nil {
		return 0, false
	}
	exact := strings.HasSuffix(prefix, "}")
	match := strings.TrimSuffix(prefix, "}")
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, match) {
			continue
		}
		rest := line[len(match):]
		if exact && !strings.HasPrefix(rest, "} ") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(rest[strings.LastIndexByte(rest, ' ')+1:], &v); err == nil {
			sum += v
			ok = true
		}
	}
	return sum, ok
}

// waitMetric waits until the sum of the samples matching prefix exceeds
// above, and returns it.
func waitMetric(ctx context.Context, t *testing.T, cs kubernetes.Interface, prefix string, above float64, timeout time.Duration) float64 {
	t.Helper()
	var sum float64
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var ok bool
		sum, ok = metricSum(ctx, t, cs, prefix)
		return ok && sum > above, nil
	})
	if err != nil {
		t.Fatalf("metric %s: not above %v within %s (last %v): %v", prefix, above, timeout, sum, err)
	}
	return sum
}

func ptrTo[T any](v T) *T { return &v }

// readyOf returns the status of an object's Ready condition, "" when it
// has none.
func readyOf(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// waitFor polls check every second until it returns nil or timeout passes.
func waitFor(ctx context.Context, t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("after %s: %v", timeout, last)
	}
}

// waitDeviceTaints waits until the guard's DeviceTaintRules of a node's
// devices carry exactly the reasons given.
func waitDeviceTaints(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string, reasons ...string) {
	t.Helper()
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.ResourceV1alpha3().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: devicetaint.LabelNode + "=" + node})
		if err != nil {
			return false, nil
		}
		last = last[:0]
		for _, r := range l.Items {
			if r.Spec.Taint.Key == guard.DeviceTaintKey {
				last = append(last, r.Spec.Taint.Value)
			}
		}
		slices.Sort(last)
		return slices.Equal(last, reasons), nil
	})
	if err != nil {
		t.Fatalf("device taints of %s are %v, want %v: %v", node, last, reasons, err)
	}
}
