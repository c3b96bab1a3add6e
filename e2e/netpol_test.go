//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

const (
	agentSelector = "app.kubernetes.io/name=xila-guard-agent"
	agentPinPath  = "/sys/fs/bpf/xila-guard"
	// enforceWithin bounds the time from the last object written to a
	// probe round that sees the whole truth table.
	enforceWithin = 2 * time.Second
)

type modelKey struct{}

// TestNetworkPolicyConformance installs the NetworkPolicy agent and walks
// the x/y/z model through the scenarios: after each step every one of the
// 81 pairs is probed on TCP 80 and 81 and UDP 80 and 81, by pod IP and by
// Service name, and must match the reference evaluator's truth table
// within 2 s. Teardown uninstalls the agent and proves that nothing stays
// enforced.
func TestNetworkPolicyConformance(t *testing.T) {
	f := features.New("NetworkPolicy conformance on kind").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			start := time.Now()
			cs := clientset(t, cfg)
			workers := workerNames(ctx, t, cs)
			installProbe(ctx, t, workers)
			helmInstallAgent(ctx, t, cfg, workers)
			m := setUpModel(ctx, t, cfg)
			t.Logf("set-up: agent and 9 model pods ready in %s", time.Since(start).Round(time.Millisecond))
			return context.WithValue(ctx, modelKey{}, m)
		}).
		Assess("every scenario matches the truth table within 2 s", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			m := ctx.Value(modelKey{}).(*model)
			start := time.Now()
			var worst time.Duration
			pick := scenarioFilter(t)
			ran := 0
			for i, s := range scenarios() {
				if !pick.MatchString(s.name) {
					continue
				}
				d := m.runScenario(ctx, t, cfg, i, s)
				worst = max(worst, d)
				ran++
			}
			t.Logf("%d scenarios in %s; slowest enforcement seen by a probe round: %s; %d probes run twice because the prober stalled",
				ran, time.Since(start).Round(time.Millisecond), worst.Round(time.Millisecond), m.retried)
			return ctx
		}).
		Assess(newPodCheck, func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if scenarioFilter(t).MatchString(newPodCheck) {
				checkNewPodFromFirstPacket(ctx, t, cfg, workerNames(ctx, t, clientset(t, cfg))[0])
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			m, _ := ctx.Value(modelKey{}).(*model)
			uninstallAgent(ctx, t, cfg, m)
			if m != nil {
				for _, ns := range modelNamespaces {
					if err := m.cs.CoreV1().Namespaces().Delete(ctx, m.ns(ns), metav1.DeleteOptions{}); err != nil {
						t.Errorf("deleting namespace %s: %v", m.ns(ns), err)
					}
				}
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// scenarioFilter returns the regexp of E2E_NETPOL_SCENARIOS (every
// scenario when unset), for running a few scenarios while working on them.
// Scenarios set their policies and labels in full, so any subset runs.
func scenarioFilter(t *testing.T) *regexp.Regexp {
	re, err := regexp.Compile(os.Getenv("E2E_NETPOL_SCENARIOS"))
	if err != nil {
		t.Fatalf("E2E_NETPOL_SCENARIOS: %v", err)
	}
	return re
}

// runScenario applies one step and probes until the truth table matches,
// failing when no round started within enforceWithin of the change
// matches. It returns when the matching round started.
func (m *model) runScenario(ctx context.Context, t *testing.T, cfg *envconf.Config, i int, s scenario) time.Duration {
	t.Helper()
	if err := m.apply(ctx, s); err != nil {
		t.Fatalf("scenario %d %q: applying: %v", i, s.name, err)
	}
	changed := time.Now()
	var oldAgents map[string]bool
	if s.restartAgents {
		oldAgents = restartAgents(ctx, t, cfg)
	}
	denyAll := map[podRef]bool{}
	for _, r := range s.denyAll {
		denyAll[r] = true
	}
	want, err := m.truth(ctx, denyAll)
	if err != nil {
		t.Fatalf("scenario %d %q: computing the truth: %v", i, s.name, err)
	}
	for round := 1; ; round++ {
		began := time.Now()
		got, why, err := m.probeAllWhy(ctx)
		if err != nil {
			t.Fatalf("scenario %d %q: probing: %v", i, s.name, err)
		}
		var wrong []probeKey
		var wrongWhy []string
		for k, w := range want {
			if got[k] != w {
				wrong = append(wrong, k)
			}
		}
		for _, k := range wrong {
			seen := "connected, want refused"
			if !got[k] {
				seen = "did not connect: " + why[k]
			}
			wrongWhy = append(wrongWhy, k.String()+": "+seen)
		}
		slices.Sort(wrongWhy)
		if len(wrong) == 0 {
			d := began.Sub(changed)
			t.Logf("scenario %2d %-70q ok: round %d began %s after the change, %s per round",
				i, s.name, round, d.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
			if s.restartAgents {
				waitNewAgents(ctx, t, cfg, oldAgents)
				if again, err := m.probeAll(ctx); err != nil {
					t.Fatalf("scenario %d %q: probing after the restart: %v", i, s.name, err)
				} else if n := countWrong(want, again); n > 0 {
					t.Errorf("scenario %d %q: after the new agents took over, %d probes differ from the truth", i, s.name, n)
				}
			}
			for _, r := range s.denyAll {
				m.waitDenyAllEvent(ctx, t, r)
			}
			return d
		}
		if time.Since(changed) >= enforceWithin {
			var tables []string
			for _, p := range modelPorts {
				for _, via := range []bool{false, true} {
					tables = append(tables, m.table(want, got, p, via))
				}
			}
			t.Fatalf("scenario %d %q: %d of %d probes differ from the truth %s after the change (round %d):\n%s\n%s",
				i, s.name, len(wrong), len(want), time.Since(changed).Round(time.Millisecond), round,
				strings.Join(firstN(wrongWhy, 20), "\n"), strings.Join(tables, "\n"))
		}
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n], fmt.Sprintf("... and %d more", len(s)-n))
	}
	return s
}

// apply makes the model's policies and labels exactly the scenario's.
func (m *model) apply(ctx context.Context, s scenario) error {
	want := map[string]*networkingv1.NetworkPolicy{}
	for _, p := range s.policies(m) {
		p = p.DeepCopy()
		p.Namespace = m.ns(p.Namespace)
		want[p.Namespace+"/"+p.Name] = p
	}
	np := m.cs.NetworkingV1()
	for _, ns := range modelNamespaces {
		have, err := np.NetworkPolicies(m.ns(ns)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, h := range have.Items {
			w, ok := want[h.Namespace+"/"+h.Name]
			switch {
			case !ok:
				if err := np.NetworkPolicies(h.Namespace).Delete(ctx, h.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			case !equality.Semantic.DeepEqual(w.Spec, h.Spec):
				w.ResourceVersion = h.ResourceVersion
				if _, err := np.NetworkPolicies(h.Namespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			delete(want, h.Namespace+"/"+h.Name)
		}
	}
	for _, w := range want {
		if _, err := np.NetworkPolicies(w.Namespace).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, ref := range m.order {
		labels := map[string]string{"pod": ref.name}
		maps.Copy(labels, s.podLabels[ref])
		if err := setPodLabels(ctx, m.cs, m.ns(ref.ns), ref.name, labels); err != nil {
			return err
		}
	}
	for _, ns := range modelNamespaces {
		labels := map[string]string{"ns": ns}
		maps.Copy(labels, s.nsLabels[ns])
		if err := setNamespaceLabels(ctx, m.cs, m.ns(ns), labels); err != nil {
			return err
		}
	}
	return nil
}

// waitDenyAllEvent waits for the agent's Warning Event on a pod that fell
// back to deny-all.
func (m *model) waitDenyAllEvent(ctx context.Context, t *testing.T, ref podRef) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := m.cs.CoreV1().Events(m.ns(ref.ns)).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + ref.name + ",reason=NetworkPolicyDenyAll"})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "capacity") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no Warning NetworkPolicyDenyAll Event about capacity on pod %s: %v", ref, err)
	}
}

// helmInstallAgent installs the chart with the NetworkPolicy agent only.
// Kind nodes made by a container runtime that predates CAP_BPF and
// CAP_PERFMON cannot pass them on, so the agent gets SYS_ADMIN instead,
// exactly when a worker's bounding set lacks CAP_BPF.
func helmInstallAgent(ctx context.Context, t *testing.T, cfg *envconf.Config, workers []string) {
	t.Helper()
	agent := map[string]any{"enabled": true}
	if !nodeHasCapBPF(ctx, t, workers[0]) {
		t.Logf("the kind nodes' bounding set lacks CAP_BPF: the agent runs with SYS_ADMIN in its place")
		agent["extraCapabilities"] = []any{"SYS_ADMIN"}
	}
	installChart(ctx, t, cfg, nil, map[string]any{"networkPolicy": agent})
}

// nodeHasCapBPF reads the bounding set of a kind node's init process.
func nodeHasCapBPF(ctx context.Context, t *testing.T, node string) bool {
	t.Helper()
	out, err := dockerExec(ctx, node, nil, "grep", "CapBnd", "/proc/1/status")
	if err != nil {
		t.Fatalf("reading the capabilities of %s: %v", node, err)
	}
	var bnd uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "CapBnd:")), "%x", &bnd); err != nil {
		t.Fatalf("parsing %q: %v", out, err)
	}
	const capBPF = 39
	return bnd&(1<<capBPF) != 0
}

// restartAgents deletes every agent pod; the DaemonSet brings new ones.
// It returns the names of the deleted pods.
func restartAgents(ctx context.Context, t *testing.T, cfg *envconf.Config) map[string]bool {
	t.Helper()
	cs := clientset(t, cfg)
	pods, err := cs.CoreV1().Pods(lab.PlatformNamespace).List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("listing the agent pods: %v (%d found)", err, len(pods.Items))
	}
	old := map[string]bool{}
	for _, p := range pods.Items {
		old[p.Name] = true
		if err := cs.CoreV1().Pods(lab.PlatformNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting agent pod %s: %v", p.Name, err)
		}
	}
	return old
}

// waitNewAgents waits until as many agent pods as before run, none of them
// an old one, all Ready.
func waitNewAgents(ctx context.Context, t *testing.T, cfg *envconf.Config, old map[string]bool) {
	t.Helper()
	cs := clientset(t, cfg)
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(lab.PlatformNamespace).List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
		if err != nil || len(pods.Items) != len(old) {
			return false, nil
		}
		for _, p := range pods.Items {
			if old[p.Name] || !podReady(&p) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("new agent pods not Ready: %v", err)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// uninstallAgent removes the chart and proves the uninstall leaves nothing
// enforcing: no pins on the workers, and the model's deny-all policies no
// longer block anything.
func uninstallAgent(ctx context.Context, t *testing.T, cfg *envconf.Config, m *model) {
	t.Helper()
	cs := clientset(t, cfg)
	uninstallChart(ctx, t, cfg)
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(lab.PlatformNamespace).List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
		return err == nil && len(pods.Items) == 0, nil
	}); err != nil {
		t.Errorf("agent pods still there after uninstall: %v", err)
	}
	for _, w := range workerNames(ctx, t, cs) {
		if out, err := dockerExec(ctx, w, nil, "ls", agentPinPath); err == nil {
			t.Errorf("uninstall left pins on %s under %s: %s", w, agentPinPath, out)
		}
	}
	if m == nil {
		return
	}
	s := scenario{name: "uninstalled: policies present, nothing enforced", policies: policies(np("x", "deny-all", nil, in, eg), np("y", "deny-all", nil, in, eg))}
	if err := m.apply(ctx, s); err != nil {
		t.Errorf("applying policies after uninstall: %v", err)
		return
	}
	got, err := m.probeAll(ctx)
	if err != nil {
		t.Errorf("probing after uninstall: %v", err)
		return
	}
	var blocked []probeKey
	for k, ok := range got {
		if !ok {
			blocked = append(blocked, k)
		}
	}
	if len(blocked) > 0 {
		t.Errorf("after uninstall %d probes are still blocked:\n%s", len(blocked), strings.Join(firstN(sortedKeys(blocked), 20), "\n"))
	}
}

func countWrong(want, got map[probeKey]bool) int {
	n := 0
	for k, w := range want {
		if got[k] != w {
			n++
		}
	}
	return n
}
