//go:build e2e

package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// env is what make terraform-test passes in.
type env struct {
	repoRoot, binDir, imageTag, cliConfig string
}

func settings(t *testing.T) env {
	t.Helper()
	e := env{
		repoRoot: os.Getenv("REPO_ROOT"), binDir: os.Getenv("XG_BIN"),
		imageTag: os.Getenv("XG_IMAGE_TAG"), cliConfig: os.Getenv("TF_CLI_CONFIG_FILE"),
	}
	if e.repoRoot == "" || e.binDir == "" || e.imageTag == "" || e.cliConfig == "" {
		t.Fatal("REPO_ROOT, XG_BIN, XG_IMAGE_TAG and TF_CLI_CONFIG_FILE must be set: run make terraform-test")
	}
	if _, err := os.Stat(e.cliConfig); err != nil {
		t.Fatalf("no Terraform CLI configuration (%v): run make terraform-provider", err)
	}
	return e
}

// newWorkspace writes main.tf, as mainTF returns it for the directory,
// into a fresh directory and returns Terraform initialised there against
// the provider mirror only.
func newWorkspace(t *testing.T, e env, mainTF func(dir string) string) *tfexec.Terraform {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(mainTF(dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	tf, err := tfexec.NewTerraform(dir, filepath.Join(e.binDir, "terraform"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	vars["TF_CLI_CONFIG_FILE"] = e.cliConfig
	vars["CHECKPOINT_DISABLE"] = "1"
	if err := tf.SetEnv(tfexec.CleanEnv(vars)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := tf.Init(ctx); err != nil {
		t.Fatalf("terraform init against the mirror: %v", err)
	}
	return tf
}

// localSource is the module source of directory target for a
// configuration in dir. Terraform takes only a path that starts with ./ or
// ../ as a local module and uses it in place; an absolute path would be
// copied under .terraform/modules, where the module's own relative paths
// (../.., the chart, the profiles) no longer lead into the repository.
func localSource(t *testing.T, dir, target string) string {
	t.Helper()
	rel, err := filepath.Rel(dir, target)
	if err != nil {
		t.Fatal(err)
	}
	rel = filepath.ToSlash(rel)
	if !strings.HasPrefix(rel, "../") {
		rel = "./" + rel
	}
	return rel
}

// TestTerraformDiagnostics plans configurations that are wrong in one way
// each and checks that the plan fails saying what is wrong, before anything
// touches a cluster.
func TestTerraformDiagnostics(t *testing.T) {
	e := settings(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	// Port 1 on loopback: nothing listens, so the API server is unreachable.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		module string
		want   []string
	}{
		{
			name:   "unknown profile",
			module: `orchestrator_profiles = ["volcano", "no-such-orchestrator"]`,
			want:   []string{"Unknown orchestrator profile", `unknown orchestrator profile "no-such-orchestrator"`, "available:", "volcano"},
		},
		{
			name:   "invalid value names the field",
			module: `values = { enforcement = { profile = "staging" } }`,
			want:   []string{"Invalid chart value enforcement.profile", "value must be one of"},
		},
		{
			name:   "unknown value names the field",
			module: `values = { enforcement = { replicaz = 3 } }`,
			want:   []string{"Invalid chart value enforcement", "additional properties 'replicaz' not allowed"},
		},
		{
			name:   "unknown feature",
			module: `features = { no_such_feature = true }`,
			want:   []string{"Unknown feature", `has no feature "no_such_feature"`},
		},
		{
			// Unknown while Terraform validates the module, known at plan.
			name:   "two kubeconfigs",
			module: `kubeconfig = "apiVersion: v1"`,
			want:   []string{"Resource precondition failed", "set exactly one of kubeconfig and kubeconfig_path"},
		},
		{
			name:   "unreachable cluster",
			module: `features = { enforcement = true }`,
			want:   []string{"Cluster unreachable", "cannot reach the Kubernetes API server at https://127.0.0.1:1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tf := newWorkspace(t, e, func(dir string) string {
				return fmt.Sprintf(`
module "xila_guard" {
  source          = %q
  kubeconfig_path = %q
  %s
}
`, localSource(t, dir, filepath.Join(e.repoRoot, "terraform")), kubeconfig, tc.module)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := tf.Plan(ctx)
			if err == nil {
				t.Fatal("plan succeeded, want it to fail")
			}
			// Terraform wraps diagnostics in a box (│ at each line start)
			// and breaks long lines; compare the words.
			msg := strings.Join(strings.Fields(strings.NewReplacer("│", " ", "╷", " ", "╵", " ").Replace(err.Error())), " ")
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("plan error does not say %q:\n%s", want, err)
				}
			}
		})
	}
}

// TestTerraformLab applies the lab example on a kind cluster of its own,
// checks the platform, plans again (no changes), swaps a profile (an
// in-place upgrade), and destroys everything.
func TestTerraformLab(t *testing.T) {
	e := settings(t)
	cluster := fmt.Sprintf("xg-tf-%d", time.Now().Unix()%100000)
	root := func(dir string) string {
		return fmt.Sprintf(`
variable "orchestrator_profiles" {
  type = list(string)
}

module "lab" {
  source                = %q
  cluster_name          = %q
  image_tag             = %q
  orchestrator_profiles = var.orchestrator_profiles
}

output "kubeconfig" {
  value     = module.lab.kubeconfig
  sensitive = true
}
output "endpoint"              { value = module.lab.endpoint }
output "cluster_name"          { value = module.lab.cluster_name }
output "release"               { value = module.lab.release }
output "orchestrator_profiles" { value = module.lab.orchestrator_profiles }
`, localSource(t, dir, filepath.Join(e.repoRoot, "terraform", "examples", "lab")), cluster, e.imageTag)
	}
	tf := newWorkspace(t, e, root)
	t.Cleanup(func() {
		// Whatever happened, leave no cluster behind.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if names, _ := kindClusters(e); contains(names, cluster) {
			_ = tf.Destroy(ctx, tfexec.Var(`orchestrator_profiles=["volcano","kai"]`))
			_ = exec.Command(filepath.Join(e.binDir, "kind"), "delete", "cluster", "--name", cluster).Run()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	start := time.Now()
	if err := tf.Apply(ctx, tfexec.Var(`orchestrator_profiles=["volcano","kai"]`)); err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Logf("apply (create cluster and install): %s", time.Since(start).Round(time.Second))

	out, err := tf.Output(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := outputString(t, out, "cluster_name"); got != cluster {
		t.Errorf("output cluster_name = %q, want %q", got, cluster)
	}
	if got := outputString(t, out, "endpoint"); !strings.HasPrefix(got, "https://127.0.0.1:") {
		t.Errorf("output endpoint = %q, want https://127.0.0.1:<port>", got)
	}
	release := outputMap(t, out, "release")
	if release["status"] != "deployed" || release["revision"] != float64(1) || release["namespace"] != "xila-guard-system" {
		t.Errorf("output release = %v, want deployed revision 1 in xila-guard-system", release)
	}
	cs := clientFor(t, outputString(t, out, "kubeconfig"))
	checkCRDs(t, cs)
	checkPlatformReady(ctx, t, cs, []string{"xila-guard-scheduler", "xila-guard-webhook"})
	checkIntegrations(ctx, t, cs, []string{"volcano", "kai"}, []string{"kueue"})

	changed, err := tf.Plan(ctx, tfexec.Var(`orchestrator_profiles=["volcano","kai"]`))
	if err != nil {
		t.Fatalf("plan after apply: %v", err)
	}
	if changed {
		t.Error("plan right after apply has changes, want none")
	}

	planFile := filepath.Join(t.TempDir(), "swap.plan")
	if _, err := tf.Plan(ctx, tfexec.Var(`orchestrator_profiles=["volcano","kueue"]`), tfexec.Out(planFile)); err != nil {
		t.Fatalf("plan with kueue instead of kai: %v", err)
	}
	plan, err := tf.ShowPlanFile(ctx, planFile)
	if err != nil {
		t.Fatal(err)
	}
	checkActions(t, plan, map[string]tfjson.Actions{
		"module.lab.module.xila_guard.xilaguard_platform.this": {tfjson.ActionUpdate},
	})
	start = time.Now()
	if err := tf.Apply(ctx, tfexec.DirOrPlan(planFile)); err != nil {
		t.Fatalf("apply with kueue instead of kai: %v", err)
	}
	t.Logf("apply (upgrade): %s", time.Since(start).Round(time.Second))
	out, err = tf.Output(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if release := outputMap(t, out, "release"); release["revision"] != float64(2) || release["status"] != "deployed" {
		t.Errorf("output release after the upgrade = %v, want deployed revision 2", release)
	}
	checkIntegrations(ctx, t, cs, []string{"volcano", "kueue"}, []string{"kai"})
	checkPlatformReady(ctx, t, cs, []string{"xila-guard-scheduler", "xila-guard-webhook"})

	start = time.Now()
	if err := tf.Destroy(ctx, tfexec.Var(`orchestrator_profiles=["volcano","kueue"]`)); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	t.Logf("destroy: %s", time.Since(start).Round(time.Second))
	names, err := kindClusters(e)
	if err != nil {
		t.Fatal(err)
	}
	if contains(names, cluster) {
		t.Errorf("kind still lists cluster %s after destroy", cluster)
	}
	ps, err := exec.Command("docker", "ps", "-a", "--filter", "label=io.x-k8s.kind.cluster="+cluster, "--format", "{{.Names}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, ps)
	}
	if s := strings.TrimSpace(string(ps)); s != "" {
		t.Errorf("containers of cluster %s left after destroy: %s", cluster, s)
	}
}

func checkActions(t *testing.T, plan *tfjson.Plan, want map[string]tfjson.Actions) {
	t.Helper()
	seen := map[string]bool{}
	for _, rc := range plan.ResourceChanges {
		if rc.Change == nil || rc.Change.Actions.NoOp() || rc.Change.Actions.Read() {
			continue
		}
		seen[rc.Address] = true
		w, ok := want[rc.Address]
		if !ok {
			t.Errorf("plan changes %s (%v), want no change", rc.Address, rc.Change.Actions)
			continue
		}
		if !rc.Change.Actions.Update() || !w.Update() {
			t.Errorf("plan %v %s, want %v", rc.Change.Actions, rc.Address, w)
		}
	}
	for addr := range want {
		if !seen[addr] {
			t.Errorf("plan does not change %s", addr)
		}
	}
}

func checkPlatformReady(ctx context.Context, t *testing.T, cs kubernetes.Interface, prefixes []string) {
	t.Helper()
	pods, err := cs.CoreV1().Pods("xila-guard-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			t.Errorf("pod %s is not Ready (phase %s)", p.Name, p.Status.Phase)
		}
		for _, pre := range prefixes {
			if strings.HasPrefix(p.Name, pre+"-") {
				found[pre] = true
			}
		}
	}
	for _, pre := range prefixes {
		if !found[pre] {
			t.Errorf("no %s pod in xila-guard-system", pre)
		}
	}
}

// checkCRDs checks that the apply served the guard kinds, which the
// chart's workloads watch.
func checkCRDs(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	list, err := cs.Discovery().ServerResourcesForGroupVersion("guard.xila.us/v1alpha1")
	if err != nil {
		t.Fatalf("guard.xila.us/v1alpha1 is not served: %v", err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
	}
	for _, want := range []string{"placementpolicies", "tenantbindings", "nodesecuritystates"} {
		if !served[want] {
			t.Errorf("guard.xila.us/v1alpha1 does not serve %s", want)
		}
	}
}

func checkIntegrations(ctx context.Context, t *testing.T, cs kubernetes.Interface, present, absent []string) {
	t.Helper()
	for _, name := range present {
		if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "xila-guard-integration-"+name, metav1.GetOptions{}); err != nil {
			t.Errorf("integration %s: %v", name, err)
		}
	}
	for _, name := range absent {
		if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "xila-guard-integration-"+name, metav1.GetOptions{}); err == nil {
			t.Errorf("integration %s is installed, want it absent", name)
		}
	}
}

func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		t.Fatalf("output kubeconfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func outputString(t *testing.T, out map[string]tfexec.OutputMeta, name string) string {
	t.Helper()
	var s string
	if err := unmarshalOutput(out, name, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func outputMap(t *testing.T, out map[string]tfexec.OutputMeta, name string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := unmarshalOutput(out, name, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func unmarshalOutput(out map[string]tfexec.OutputMeta, name string, v any) error {
	o, ok := out[name]
	if !ok {
		return errors.New("no output " + name)
	}
	return json.Unmarshal(o.Value, v)
}

func kindClusters(e env) ([]string, error) {
	b, err := exec.Command(filepath.Join(e.binDir, "kind"), "get", "clusters").Output()
	if err != nil {
		return nil, fmt.Errorf("kind get clusters: %w", err)
	}
	return strings.Fields(string(b)), nil
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}
