package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Names the lab shares with the product.
const (
	Group               = "guard.xila.us"
	PoolLabel           = Group + "/tenant-pool"
	TenantLabel         = Group + "/tenant"
	ControlledScheduler = "xila-guard-scheduler"
	PlatformNamespace   = "xila-guard-system"
	ReleaseName         = "xila-guard"
)

// Cluster is a kind cluster and the tools that drive it.
type Cluster struct {
	Kube       kubernetes.Interface
	Dyn        dynamic.Interface
	Config     *rest.Config
	Kubeconfig string
	BinDir     string // helm and kubectl
	RepoRoot   string
	ImageTag   string // tag of the xila-guard/<component> images
	Agnhost    string // the agnhost image, preloaded on every node
}

// NewCluster connects to the cluster of a kubeconfig file.
func NewCluster(kubeconfig, binDir, repoRoot, imageTag, agnhost string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Kube: kube, Dyn: dyn, Config: cfg, Kubeconfig: kubeconfig, BinDir: binDir,
		RepoRoot: repoRoot, ImageTag: imageTag, Agnhost: agnhost}, nil
}

// run runs a tool of BinDir and returns its error with its output.
func (c *Cluster) run(ctx context.Context, tool string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, tool), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", tool, strings.Join(args, " "), err, out)
	}
	return nil
}

// ApplyCRDs installs the guard kinds and waits until they are served.
func (c *Cluster) ApplyCRDs(ctx context.Context) error {
	if err := c.run(ctx, "kubectl", "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(c.RepoRoot, "components/api/config/crd")); err != nil {
		return err
	}
	return c.run(ctx, "kubectl", "wait", "--for=condition=Established", "--timeout=60s", "crd/placementpolicies.guard.xila.us",
		"crd/tenantbindings.guard.xila.us", "crd/nodesecuritystates.guard.xila.us", "crd/policyparametersets.guard.xila.us",
		"crd/keyreleasepolicies.guard.xila.us")
}

// PlatformOnControlPlane are the values that keep every platform pod on
// the control plane, since the workers become pool nodes.
func PlatformOnControlPlane() map[string]any {
	sel := map[string]any{"node-role.kubernetes.io/control-plane": ""}
	tol := []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}}
	return map[string]any{
		"enforcement": map[string]any{
			"core":      map[string]any{"replicas": 1, "nodeSelector": sel, "tolerations": tol},
			"scheduler": map[string]any{"nodeSelector": sel, "tolerations": tol},
		},
		"webhook":           map[string]any{"nodeSelector": sel, "tolerations": tol},
		"gpuDevicePolicies": map[string]any{"controller": map[string]any{"nodeSelector": sel, "tolerations": tol}},
	}
}

// Merge merges values maps; later ones win, maps merge deeply.
func Merge(vals ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, v := range vals {
		for k, x := range v {
			if m, ok := x.(map[string]any); ok {
				if old, ok := out[k].(map[string]any); ok {
					out[k] = Merge(old, m)
					continue
				}
				out[k] = Merge(m)
				continue
			}
			out[k] = x
		}
	}
	return out
}

// InstallChart installs or upgrades the chart with the given values (on
// top of the image tag) and waits until every pod of it is ready.
func (c *Cluster) InstallChart(ctx context.Context, values map[string]any) error {
	return c.InstallChartFrom(ctx, filepath.Join(c.RepoRoot, "charts/xila-guard"), values)
}

// InstallChartFrom is InstallChart with the chart in dir, e.g. an earlier
// version of it.
func (c *Cluster) InstallChartFrom(ctx context.Context, dir string, values map[string]any) error {
	values = Merge(map[string]any{"image": map[string]any{"tag": c.ImageTag}}, values)
	if err := c.helmUpgrade(ctx, ReleaseName, PlatformNamespace, dir, values); err != nil {
		return err
	}
	return c.WaitAdmissionServing(ctx)
}

// helmUpgrade installs or upgrades release from the chart in dir with
// values, in namespace, and waits until every pod of it is ready.
func (c *Cluster) helmUpgrade(ctx context.Context, release, namespace, dir string, values map[string]any) error {
	b, err := json.Marshal(values)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "xg-values-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return c.run(ctx, "helm", "upgrade", "--install", release, dir,
		"-n", namespace, "--create-namespace", "--wait", "--timeout", "3m", "-f", f.Name())
}

// WaitAdmissionServing waits until the API server reaches the webhook.
// helm --wait returns once the webhook's pods are ready, but the Service's
// endpoints still have to reach kube-proxy on the control plane; until then
// a pod create in a tenant's namespace fails with "failed calling webhook".
// The probe is a pod in the default namespace that names a node: outside
// the tenants' namespaces only such pods are sent to the webhook, so it is
// judged by the webhook whatever tenants exist. It is a server-side dry
// run (sent to webhooks without side effects); the webhook serves once the
// API server gets any answer from it, admitted or refused. Without the
// webhook it is admitted at once.
func (c *Cluster) WaitAdmissionServing(ctx context.Context) error {
	if err := c.waitWebhookEndpoints(ctx); err != nil {
		return err
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.AdmissionProbe(ctx)
		return last == nil || !strings.Contains(last.Error(), "failed calling webhook"), nil
	})
	if err != nil {
		return fmt.Errorf("admission webhooks not answering after the install: %v (last: %v)", err, last)
	}
	return nil
}

// waitWebhookEndpoints waits until the Service of every webhook the
// release registers (validating and mutating) has a ready endpoint, so that
// no webhook of the release, whichever Service serves it, is left for the
// probe to miss.
func (c *Cluster) waitWebhookEndpoints(ctx context.Context) error {
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + ReleaseName}
	services := map[string]bool{}
	vwcs, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, sel)
	if err != nil {
		return err
	}
	for _, cfg := range vwcs.Items {
		for _, w := range cfg.Webhooks {
			if s := w.ClientConfig.Service; s != nil {
				services[s.Namespace+"/"+s.Name] = true
			}
		}
	}
	mwcs, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, sel)
	if err != nil {
		return err
	}
	for _, cfg := range mwcs.Items {
		for _, w := range cfg.Webhooks {
			if s := w.ClientConfig.Service; s != nil {
				services[s.Namespace+"/"+s.Name] = true
			}
		}
	}
	for svc := range services {
		ns, name, _ := strings.Cut(svc, "/")
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			slices, err := c.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + name})
			if err != nil {
				return false, nil
			}
			for _, sl := range slices.Items {
				for _, e := range sl.Endpoints {
					if e.Conditions.Ready != nil && *e.Conditions.Ready {
						return true, nil
					}
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("no ready endpoint of webhook Service %s after the install: %w", svc, err)
		}
	}
	return nil
}

// AdmissionProbe creates the probe pod of WaitAdmissionServing once, with a
// server-side dry run, and returns the API server's answer: nil when
// admitted, the refusal otherwise; "failed calling webhook" in it means a
// fail-closed webhook did not answer.
func (c *Cluster) AdmissionProbe(ctx context.Context) error {
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "xg-admission-probe-", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeName:   "xg-admission-probe",
			Containers: []corev1.Container{{Name: "probe", Image: c.Agnhost}},
		},
	}
	_, err := c.Kube.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// Helm runs helm against the cluster and returns its output.
func (c *Cluster) Helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "helm"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// UninstallChart removes the release and waits until its pods are gone,
// so that the next install starts clean.
func (c *Cluster) UninstallChart(ctx context.Context) error {
	if err := c.run(ctx, "helm", "uninstall", ReleaseName, "-n", PlatformNamespace, "--wait", "--ignore-not-found"); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(PlatformNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + ReleaseName})
		return err == nil && len(pods.Items) == 0, nil
	})
}

// WebhookDown scales the release's webhook Deployment to zero and waits
// until the API server can no longer call it: probe, a create the webhook
// judges (a server-side dry run), fails with "failed calling webhook".
// Until the Service's endpoints are gone, a terminating webhook pod may
// still answer. It returns what scales the webhook back to the replicas it
// had and waits until the API server reaches it again; a test that calls
// it changes the release and must call restore.
func (c *Cluster) WebhookDown(ctx context.Context, probe func(context.Context) error) (restore func(context.Context) error, err error) {
	const name = ReleaseName + "-webhook"
	deployments := c.Kube.AppsV1().Deployments(PlatformNamespace)
	scale := func(ctx context.Context, n int32) (was int32, err error) {
		s, err := deployments.GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		was, s.Spec.Replicas = s.Spec.Replicas, n
		_, err = deployments.UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return was, err
	}
	was, err := scale(ctx, 0)
	if err != nil {
		return nil, err
	}
	restore = func(ctx context.Context) error {
		if _, err := scale(ctx, was); err != nil {
			return fmt.Errorf("scaling the webhook back to %d: %w", was, err)
		}
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			d, err := deployments.Get(ctx, name, metav1.GetOptions{})
			return err == nil && d.Status.ReadyReplicas == was, nil
		})
		if err != nil {
			return fmt.Errorf("webhook not back to %d ready replicas: %w", was, err)
		}
		return c.WaitAdmissionServing(ctx)
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = probe(ctx)
		return last != nil && strings.Contains(last.Error(), "failed calling webhook"), nil
	})
	if err != nil {
		return restore, fmt.Errorf("the webhook scaled to zero still answers: %v (last: %v)", err, last)
	}
	return restore, nil
}
