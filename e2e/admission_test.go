//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

type labKey struct{}

// labFrom returns the lab a Setup put in the context.
func labFrom(ctx context.Context, t *testing.T) *lab.Lab {
	t.Helper()
	l, ok := ctx.Value(labKey{}).(*lab.Lab)
	if !ok {
		t.Fatal("no lab in the context: its Setup failed")
	}
	return l
}

// setUpLab installs the CRDs, makes a tenant whose pool is both workers
// and installs the chart with the values values returns.
func setUpLab(values func(l *lab.Lab) (map[string]any, error)) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		c, err := lab.NewCluster(cfg.KubeconfigFile(), suite.BinDir, suite.RepoRoot, suite.ImageTag, suite.Agnhost)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyCRDs(ctx); err != nil {
			t.Fatal(err)
		}
		tenant, err := c.CreateTenant(ctx, envconf.RandomName("xg-tenant", 16))
		if err != nil {
			t.Fatal(err)
		}
		l := &lab.Lab{Cluster: c, Tenant: tenant, User: tenant.Name + "-developer"}
		ctx = context.WithValue(ctx, labKey{}, l)
		vals, err := values(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.InstallChart(ctx, vals); err != nil {
			t.Fatal(err)
		}
		return ctx
	}
}

// tearDownLab removes the tenant (pods first: the pool is locked while
// they run) and then the chart.
func tearDownLab(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	l, ok := ctx.Value(labKey{}).(*lab.Lab)
	if !ok {
		return ctx
	}
	if err := l.Tenant.Delete(ctx); err != nil {
		t.Errorf("deleting the tenant: %v", err)
	}
	if err := l.UninstallChart(ctx); err != nil {
		t.Errorf("uninstalling the chart: %v", err)
	}
	return ctx
}

// externalSchedulers are the orchestrator profiles TestPlatform installs.
var externalSchedulers = []string{"runai", "volcano"}

// workloadLabels are labels that put a pod under a profile's workload
// selector (profiles/<name>.yaml).
var workloadLabels = map[string]map[string]string{
	"runai":   {"runai/queue": "team-a"},
	"volcano": {"volcano.sh/job-name": "train", "volcano.sh/queue-name": "default"},
}

const binderRole = "xg-e2e-external-binders"

// withIntegrations are the lab's values in the lab profile with the
// profiles of externalSchedulers enabled; it lets their binders bind, as
// their own RBAC would.
func withIntegrations(l *lab.Lab) (map[string]any, error) {
	var integrations []any
	var binders []string
	for _, name := range externalSchedulers {
		in, err := l.Profile(name)
		if err != nil {
			return nil, err
		}
		integrations = append(integrations, in)
		for _, b := range in["binderServiceAccounts"].([]any) {
			binders = append(binders, b.(string))
		}
	}
	if err := l.GrantBinding(context.Background(), binderRole, binders...); err != nil {
		return nil, err
	}
	// In the lab's overrides, so that a step that reinstalls the lab's
	// values keeps them.
	// The real DRA driver's DaemonSet (realDRASteps) is trusted on the pools.
	// GPUs for VMs are on (realDRASteps' VMI takes its GPU through a
	// claim); their controller needs KubeVirt's CRDs.
	if err := l.ApplyKubeVirtCRDs(context.Background()); err != nil {
		return nil, err
	}
	l.Overrides = lab.Merge(l.Overrides, map[string]any{"orchestratorIntegrations": integrations}, lab.DRADriverTrust(), lab.GPUsForVMs())
	return l.Values("lab"), nil
}

// admissionSteps check admission on the platform (TestPlatform): the ways
// around the controlled scheduler are refused; a run:ai-shaped and a
// Volcano-shaped workload, bound by the test acting as their scheduler,
// are admitted when compliant and refused when privileged or pinned; a
// second co-registered webhook's refusal holds as well (every webhook must
// admit); and every phase of make demo, in order.
func admissionSteps(f *features.FeatureBuilder) *features.FeatureBuilder {
	return f.
		Assess("admission: the webhook refuses an alternate scheduler, nodeName and privileged", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			for _, c := range lab.WebhookCases(l.Tenant) {
				if err := l.ExpectDenied(ctx, l.Kube, l.Tenant.Name, l.Pod(c.Pod, c.Options...), c.Reason); err != nil {
					t.Errorf("%s: %v", c.Name, err)
				}
			}
			p, err := l.Kube.CoreV1().Pods(l.Tenant.Name).Create(ctx, l.Pod("compliant"), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("a compliant pod was refused: %v", err)
			}
			pod, err := lab.WaitRunning(ctx, l.Kube, l.Tenant.Name, p.Name)
			if err != nil {
				t.Fatal(err)
			}
			if pod.Spec.NodeName != l.Tenant.Workers[lab.CompliantWorker] {
				t.Errorf("compliant pod runs on %s, want %s", pod.Spec.NodeName, l.Tenant.Workers[lab.CompliantWorker])
			}
			// A tenant pod runs there now: the node's pool label stays,
			// whether removed through nodes or through nodes/status (dry
			// runs, so that nothing changes if one got through).
			unlabel := []byte(`{"metadata":{"labels":{"` + lab.PoolLabel + `":null}}}`)
			for _, sub := range []string{"", "status"} {
				var last error
				_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
					var subresources []string
					if sub != "" {
						subresources = []string{sub}
					}
					_, last = l.Kube.CoreV1().Nodes().Patch(ctx, pod.Spec.NodeName, types.MergePatchType, unlabel,
						metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, subresources...)
					_, denied := lab.AdmissionDenial(last)
					return denied, nil
				})
				if msg, denied := lab.AdmissionDenial(last); !denied || !strings.Contains(msg, "POOL_MEMBERSHIP_LOCKED") {
					t.Errorf("removing the pool label of %s (subresource %q) under a tenant pod: want POOL_MEMBERSHIP_LOCKED, got %v",
						pod.Spec.NodeName, sub, last)
				}
			}
			// Binding is the controlled scheduler's: not even the cluster
			// administrator binds a protected pod.
			held, err := l.Kube.CoreV1().Pods(l.Tenant.Name).Create(ctx, l.Pod("held", lab.WithScheduler("runai-scheduler"), lab.WithLabels(workloadLabels["runai"])), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = lab.Bind(ctx, l.Kube, l.Tenant.Name, held.Name, l.Tenant.Workers[lab.CompliantWorker])
			if msg, denied := lab.AdmissionDenial(err); !denied || !strings.Contains(msg, "BINDING_NOT_ALLOWED") {
				t.Errorf("the administrator bound a protected pod: want BINDING_NOT_ALLOWED, got %v", err)
			}
			return ctx
		}).
		Assess("admission: run:ai-shaped workload: admitted and bound when compliant, refused when privileged or pinned", externalWorkload("runai")).
		Assess("admission: Volcano-shaped workload: admitted and bound when compliant, refused when privileged or pinned", externalWorkload("volcano")).
		Assess("admission: a second webhook's refusal holds next to Xila Guard's (AND)", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			ns := l.Tenant.Name
			second, err := l.InstallSecondWebhook(ctx, envconf.RandomName("xg-second", 16), ns)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := second.Delete(ctx); err != nil {
					t.Errorf("removing the second webhook: %v", err)
				}
			}()
			// Until its configuration is in force, the label is admitted;
			// until its endpoint answers, the call fails.
			var last error
			err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
				p := l.Pod(envconf.RandomName("and-label", 16), lab.WithLabels(lab.DisallowLabel))
				_, last = l.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				if last == nil {
					_ = lab.DeletePod(ctx, l.Kube, ns, p.Name)
				}
				_, denied := lab.AdmissionDenial(last)
				return denied, nil
			})
			if err != nil {
				t.Fatalf("the second webhook never refused its label: %v", err)
			}
			msg, denied := lab.AdmissionDenial(last)
			if !denied || !strings.Contains(msg, "second.e2e.guard.xila.us") || !strings.Contains(msg, "unwanted label") {
				t.Errorf("compliant pod with the second webhook's label: want its refusal, got %v", last)
			}
			if err := l.ExpectDenied(ctx, l.Kube, ns, l.Pod("and-privileged", lab.Privileged()), "PRIVILEGED_CONTAINER"); err != nil {
				t.Errorf("privileged pod the second webhook admits: %v", err)
			}
			if _, err := l.Kube.CoreV1().Pods(ns).Create(ctx, l.Pod("and-both-admit"), metav1.CreateOptions{}); err != nil {
				t.Errorf("a pod both webhooks admit was refused: %v", err)
			}
			return ctx
		}).
		Assess("make demo's phases, in order, on the platform: production profile, lab profile, pinned to worker 2, webhook, RBAC, attested evidence", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// This step changes the release: the production phase installs
			// the production profile, the lab phase puts the lab's values
			// back, and the attested phase installs the attestation
			// controller and restores the lab's values and evidence after.
			for _, p := range labFrom(ctx, t).Phases() {
				got, err := p.Run(ctx)
				if err != nil {
					t.Fatalf("phase %q: want %s: %v", p.Name, p.Want, err)
				}
				t.Logf("phase %q: %s", p.Name, got)
			}
			return ctx
		})
}

// externalWorkload checks a workload shaped like one of an orchestrator
// profile: the test plays its scheduler and binds the pod through
// pods/binding as the profile's binder service account.
func externalWorkload(profile string) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		l := labFrom(ctx, t)
		in, err := l.Profile(profile)
		if err != nil {
			t.Fatal(err)
		}
		scheduler := in["schedulerName"].(string)
		binder, err := l.AsServiceAccount(in["binderServiceAccounts"].([]any)[0].(string))
		if err != nil {
			t.Fatal(err)
		}
		ns, worker := l.Tenant.Name, l.Tenant.Workers[lab.CompliantWorker]
		shaped := []lab.PodOption{lab.WithScheduler(scheduler), lab.WithLabels(workloadLabels[profile])}

		p, err := l.Kube.CoreV1().Pods(ns).Create(ctx, l.Pod(profile+"-compliant", shaped...), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("compliant %s pod refused: %v", profile, err)
		}
		if err := lab.Bind(ctx, binder, ns, p.Name, worker); err != nil {
			t.Fatalf("binding as %s's scheduler: %v", profile, err)
		}
		if got, err := lab.WaitRunning(ctx, l.Kube, ns, p.Name); err != nil {
			t.Error(err)
		} else if got.Spec.NodeName != worker {
			t.Errorf("%s pod runs on %s, want %s", profile, got.Spec.NodeName, worker)
		}
		if err := l.ExpectDenied(ctx, l.Kube, ns, l.Pod(profile+"-privileged", append(shaped, lab.Privileged())...), "PRIVILEGED_CONTAINER"); err != nil {
			t.Error(err)
		}
		if err := l.ExpectDenied(ctx, l.Kube, ns, l.Pod(profile+"-pinned", append(shaped, lab.WithNodeName(worker))...), "NODE_NAME_SET"); err != nil {
			t.Error(err)
		}
		// Another orchestrator's scheduler name is not a way in.
		if err := l.ExpectDenied(ctx, l.Kube, ns, l.Pod(profile+"-unknown", lab.WithScheduler(profile+"-impostor"), lab.WithLabels(workloadLabels[profile])), "SCHEDULER_NOT_ALLOWED"); err != nil {
			t.Error(err)
		}
		return ctx
	}
}
