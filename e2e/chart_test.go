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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// installWatched installs (or upgrades to) the chart in dir with values
// while probing admission, and checks that no probe met a webhook that did
// not answer, and that every fail-closed webhook is armed afterwards. The
// release's objects are named fullname-<component>.
func installWatched(ctx context.Context, t *testing.T, c *lab.Cluster, cs kubernetes.Interface, dir string, values map[string]any, fullname string) {
	t.Helper()
	w := watchAdmission(ctx, c)
	start := time.Now()
	err := c.InstallChartFrom(ctx, dir, values)
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
	if _, err := cs.BatchV1().Jobs(lab.PlatformNamespace).Get(ctx, fullname+"-webhook-arm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the arm hook's Job %s-webhook-arm: %v, want it gone after it succeeded", fullname, err)
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
			installWatched(ctx, t, l.Cluster, clientset(t, cfg), filepath.Join(suite.RepoRoot, "charts/xila-guard"), chartValues(), "xila-guard")
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
			// The webhook's replica count is the release's: scaled to zero
			// for the failing run, and restored.
			restore, err := l.WebhookDown(ctx, l.AdmissionProbe)
			defer func() {
				if restore == nil {
					return
				}
				if err := restore(ctx); err != nil {
					t.Error(err)
				}
			}()
			if err != nil {
				t.Fatal(err)
			}
			helmTest(ctx, t, l.Cluster, false)
			if err := restore(ctx); err != nil {
				t.Fatal(err)
			}
			restore = nil
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
		Assess("a release under nameOverride and fullnameOverride names every object after them, and guards as the default one does", renamedRelease).
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
			installWatched(ctx, t, l.Cluster, cs, filepath.Join(suite.RepoRoot, "charts/xila-guard"), chartValues(), "xila-guard")
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

// renamed are the names a renamed release takes (objects acme-guard-*,
// app.kubernetes.io/name acme-*), with the evaluator's Service on so that
// helm test and kubectl xila-guard status have to find it under its name.
var renamed = map[string]any{
	"nameOverride": "acme", "fullnameOverride": "acme-guard",
	"enforcement": map[string]any{"core": map[string]any{"enabled": true}},
}

// renamedRelease installs the chart under nameOverride and
// fullnameOverride, with pods being created all along, and checks that
// every object it made is named after them, and that it guards exactly as
// the default release does: the trust boundaries name its service
// accounts, so the controlled scheduler binds (its bound-evidence record
// is admitted only from its own account), the webhook refuses the ways
// around it, tenant RBAC holds, and helm test, kubectl xila-guard explain
// and status find every component by its new name.
func renamedRelease(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	c := labFrom(ctx, t).Cluster
	cs := clientset(t, cfg)
	tenant, err := c.CreateTenant(ctx, envconf.RandomName("xg-renamed", 16))
	if err != nil {
		t.Fatal(err)
	}
	l := &lab.Lab{Cluster: c, Tenant: tenant, User: tenant.Name + "-developer", Overrides: renamed}
	defer func() {
		if err := tenant.Delete(ctx); err != nil {
			t.Errorf("deleting the tenant: %v", err)
		}
		if err := l.UninstallChart(ctx); err != nil {
			t.Error(err)
		}
		if left := webhookPolicies(ctx, t, cs); len(left) > 0 {
			t.Errorf("webhooks left after helm uninstall of the renamed release: %v", left)
		}
	}()
	installWatched(ctx, t, c, cs, filepath.Join(suite.RepoRoot, "charts/xila-guard"), l.Values("lab"), "acme-guard")
	if names := unrenamed(ctx, t, cfg); len(names) > 0 {
		t.Errorf("objects of the release not named acme-guard-*: %v", names)
	}
	if err := l.AdmissionProbe(ctx); err == nil || !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("a pod naming an unknown node: %v, want the webhook's refusal", err)
	}
	helmTest(ctx, t, c, true)
	for _, p := range l.Phases() {
		switch p.Name {
		case "lab profile", "pinned to worker 2", "webhook", "RBAC":
		default:
			continue
		}
		got, err := p.Run(ctx)
		if err != nil {
			t.Errorf("%s under the renamed release: %v", p.Name, err)
			continue
		}
		t.Logf("%s: %s", p.Name, got)
	}
	out, code, err := c.Plugin(ctx, "status")
	if err != nil {
		t.Fatal(err)
	}
	for component, ready := range map[string]string{"deployment/acme-guard-webhook": "2/2", "deployment/acme-guard-scheduler": "1/1", "deployment/acme-guard-core": "1/1"} {
		if f := lab.PluginLine(out, component); len(f) < 2 || f[1] != ready {
			t.Errorf("kubectl xila-guard status: %s %v, want %s ready", component, f, ready)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "deployment/xila-guard-") || strings.HasPrefix(line, "daemonset/xila-guard-") {
			t.Errorf("kubectl xila-guard status shows a component by the default name: %s", line)
		}
	}
	if code != 0 || !strings.Contains(out, "Evaluator: acme-guard-core ready") {
		t.Errorf("kubectl xila-guard status (exit %d): want healthy, with the evaluator acme-guard-core:\n%s", code, out)
	}
	return ctx
}

// unrenamed lists the release's objects, namespaced and cluster-wide,
// whose name does not start with acme-guard-.
func unrenamed(ctx context.Context, t *testing.T, cfg *envconf.Config) []string {
	t.Helper()
	out, err := exec.CommandContext(ctx, filepath.Join(suite.BinDir, "kubectl"), "--kubeconfig", cfg.KubeconfigFile(),
		"get", "--all-namespaces", "-l", "app.kubernetes.io/instance="+lab.ReleaseName, "-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name}{"\n"}{end}`,
		"deployments,daemonsets,services,serviceaccounts,configmaps,secrets,roles,rolebindings,clusterroles,clusterrolebindings,"+
			"validatingwebhookconfigurations,mutatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,"+
			"leases,networkpolicies,poddisruptionbudgets").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get: %v: %s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) < 10 {
		t.Fatalf("the renamed release has %d labelled objects, want its deployments, services, roles and webhooks: %s", len(lines), out)
	}
	var bad []string
	for _, obj := range lines {
		if _, name, _ := strings.Cut(obj, "/"); !strings.HasPrefix(name, "acme-guard-") {
			bad = append(bad, obj)
		}
	}
	return bad
}
