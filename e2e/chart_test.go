//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

// previousChart is the commit of the chart's previous version (0.1.0): the
// upgrade test installs the chart as it was there, then upgrades to this
// one.
const previousChart = "3ca9e04"

// partOf selects the platform's objects.
const partOf = "app.kubernetes.io/part-of=xila-guard"

// admissionWindow probes admission every 200 ms while it runs, as a team
// creating pods during an install would, and counts the refusals of a
// fail-closed webhook that did not answer.
type admissionWindow struct {
	stop    chan struct{}
	done    sync.WaitGroup
	mu      sync.Mutex
	probes  int
	failed  int
	example error
}

func watchAdmission(ctx context.Context, c *lab.Cluster) *admissionWindow {
	w := &admissionWindow{stop: make(chan struct{})}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			err := c.AdmissionProbe(ctx)
			w.mu.Lock()
			w.probes++
			if err != nil && strings.Contains(err.Error(), "failed calling webhook") {
				w.failed++
				w.example = err
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// end stops the probes and returns how many ran, failed, and one failure.
func (w *admissionWindow) end() (probes, failed int, example error) {
	close(w.stop)
	w.done.Wait()
	return w.probes, w.failed, w.example
}

// webhookPolicies returns the failurePolicy of every webhook of the
// platform's configurations, by configuration/webhook.
func webhookPolicies(ctx context.Context, t *testing.T, cs kubernetes.Interface) map[string]admissionregistrationv1.FailurePolicyType {
	t.Helper()
	out := map[string]admissionregistrationv1.FailurePolicyType{}
	vs, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: partOf})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Items {
		for _, h := range v.Webhooks {
			out[v.Name+"/"+h.Name] = *h.FailurePolicy
		}
	}
	ms, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: partOf})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms.Items {
		for _, h := range m.Webhooks {
			out[m.Name+"/"+h.Name] = *h.FailurePolicy
		}
	}
	return out
}

// chartValues are the lab's platform values: enforcement and the webhook,
// on the control plane; keys the previous chart version knows too.
func chartValues() map[string]any {
	return lab.Merge(lab.PlatformOnControlPlane(), map[string]any{
		"enforcement": map[string]any{"enabled": true, "profile": "lab"},
		"webhook":     map[string]any{"enabled": true},
	})
}

// installWatched installs (or upgrades to) the chart in dir while probing
// admission, and checks that no probe met a webhook that did not answer,
// and that every fail-closed webhook is armed afterwards.
func installWatched(ctx context.Context, t *testing.T, c *lab.Cluster, cs kubernetes.Interface, dir string) {
	t.Helper()
	w := watchAdmission(ctx, c)
	start := time.Now()
	err := c.InstallChartFrom(ctx, dir, chartValues())
	probes, failed, example := w.end()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm upgrade --install of %s took %s; %d admission probes meanwhile, %d refused for a webhook that did not answer",
		filepath.Base(dir), time.Since(start).Round(time.Second), probes, failed)
	if failed > 0 {
		t.Errorf("%d of %d pod creations failed while the chart was installed: %v", failed, probes, example)
	}
	policies := webhookPolicies(ctx, t, cs)
	if len(policies) < 5 {
		t.Errorf("webhooks %v, want at least the pods, bindings and nodes webhooks", policies)
	}
	for name, p := range policies {
		if p != admissionregistrationv1.Fail {
			t.Errorf("webhook %s failurePolicy %s after the install, want Fail", name, p)
		}
	}
	if _, err := cs.BatchV1().Jobs(lab.PlatformNamespace).Get(ctx, "xila-guard-webhook-arm", metav1.GetOptions{}); err == nil {
		t.Errorf("the arm hook's Job is left after it succeeded")
	}
}

// helmTest runs helm test and checks that it passes, or with pass false
// that it fails.
func helmTest(ctx context.Context, t *testing.T, c *lab.Cluster, pass bool) {
	t.Helper()
	out, err := c.Helm(ctx, "test", lab.ReleaseName, "-n", lab.PlatformNamespace, "--timeout", "2m")
	switch {
	case pass && err != nil:
		t.Fatal(err)
	case !pass && err == nil:
		t.Fatalf("helm test passed with the webhook down:\n%s", out)
	case pass && !strings.Contains(out, "Phase:          Succeeded"):
		t.Errorf("helm test output:\n%s", out)
	}
}

// TestChartLifecycle installs, tests, uninstalls and upgrades the chart as
// an operator does, with pods being created all along: no pod creation
// fails for a webhook that is not up yet, every fail-closed webhook is
// armed once the release is, helm test passes, an uninstall leaves no
// webhook configuration behind, and an upgrade from the previous chart
// version keeps them armed throughout.
func TestChartLifecycle(t *testing.T) {
	f := features.New("chart: safe install, helm test, clean uninstall, upgrade from the previous version").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c, err := lab.NewCluster(cfg.KubeconfigFile(), suite.BinDir, suite.RepoRoot, suite.ImageTag, suite.Agnhost)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.ApplyCRDs(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.UninstallChart(ctx); err != nil {
				t.Fatal(err)
			}
			return context.WithValue(ctx, labKey{}, &lab.Lab{Cluster: c})
		}).
		Assess("a first install opens no window in which pod creation fails, and arms every webhook", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			installWatched(ctx, t, l.Cluster, clientset(t, cfg), filepath.Join(suite.RepoRoot, "charts/xila-guard"))
			// Armed means enforced: a pod naming a node is judged, and this
			// one, for a node that does not exist, refused.
			if err := l.AdmissionProbe(ctx); err == nil || !strings.Contains(err.Error(), "denied the request") {
				t.Errorf("a pod naming an unknown node after the install: %v, want the webhook's refusal", err)
			}
			return ctx
		}).
		Assess("helm test: passes while the webhook, the scheduler and the evaluator answer, fails while the webhook is down", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			helmTest(ctx, t, l.Cluster, true)
			kubectl := filepath.Join(suite.BinDir, "kubectl")
			runTool(ctx, t, kubectl, "--kubeconfig", cfg.KubeconfigFile(), "-n", lab.PlatformNamespace, "scale", "deployment/xila-guard-webhook", "--replicas=0")
			runTool(ctx, t, kubectl, "--kubeconfig", cfg.KubeconfigFile(), "-n", lab.PlatformNamespace, "wait", "--for=delete", "pod",
				"-l", "app.kubernetes.io/name=xila-guard-webhook", "--timeout=2m")
			helmTest(ctx, t, l.Cluster, false)
			runTool(ctx, t, kubectl, "--kubeconfig", cfg.KubeconfigFile(), "-n", lab.PlatformNamespace, "scale", "deployment/xila-guard-webhook", "--replicas=2")
			runTool(ctx, t, kubectl, "--kubeconfig", cfg.KubeconfigFile(), "-n", lab.PlatformNamespace, "rollout", "status", "deployment/xila-guard-webhook", "--timeout=2m")
			helmTest(ctx, t, l.Cluster, true)
			return ctx
		}).
		Assess("helm uninstall leaves no webhook configuration", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			if err := l.UninstallChart(ctx); err != nil {
				t.Fatal(err)
			}
			if left := webhookPolicies(ctx, t, clientset(t, cfg)); len(left) > 0 {
				t.Errorf("webhooks left after helm uninstall: %v", left)
			}
			if err := l.AdmissionProbe(ctx); err != nil {
				t.Errorf("a pod naming a node after the uninstall: %v, want it admitted (nothing guards it any more)", err)
			}
			return ctx
		}).
		Assess("an upgrade from the previous chart version keeps every webhook armed and answering", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			cs := clientset(t, cfg)
			dir := t.TempDir()
			archive := exec.CommandContext(ctx, "git", "-C", suite.RepoRoot, "archive", "--format=tar", previousChart, "charts/xila-guard")
			untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
			pipe, err := archive.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			untar.Stdin = pipe
			untar.Stderr, archive.Stderr = os.Stderr, os.Stderr
			if err := untar.Start(); err != nil {
				t.Fatal(err)
			}
			if err := archive.Run(); err != nil {
				t.Fatalf("git archive %s charts/xila-guard: %v (the upgrade test needs the repository's history)", previousChart, err)
			}
			if err := untar.Wait(); err != nil {
				t.Fatal(err)
			}
			previous := filepath.Join(dir, "charts/xila-guard")
			if err := l.InstallChartFrom(ctx, previous, chartValues()); err != nil {
				t.Fatalf("installing the previous chart: %v", err)
			}
			installWatched(ctx, t, l.Cluster, cs, filepath.Join(suite.RepoRoot, "charts/xila-guard"))
			helmTest(ctx, t, l.Cluster, true)
			out, err := l.Helm(ctx, "history", lab.ReleaseName, "-n", lab.PlatformNamespace)
			if err != nil || !strings.Contains(out, "xila-guard-0.1.0") || !strings.Contains(out, "xila-guard-0.2.0") {
				t.Errorf("helm history (%v):\n%s", err, out)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if err := labFrom(ctx, t).UninstallChart(ctx); err != nil {
				t.Error(err)
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
