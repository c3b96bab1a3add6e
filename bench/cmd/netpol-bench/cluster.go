package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	agentNS       = "xila-guard-system"
	agentRelease  = "xila-guard"
	agentSelector = "app.kubernetes.io/name=xila-guard-agent"
)

// common are the flags every measurement takes.
type common struct {
	kubeconfig, helm, chart, imageTag, agnhost, prober string
	out                                                string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the kind cluster (required)")
	fs.StringVar(&c.helm, "helm", "_output/bin/helm", "helm binary")
	fs.StringVar(&c.chart, "chart", "charts/xila-guard", "the chart that installs the agent")
	fs.StringVar(&c.imageTag, "image-tag", "", "tag of the xila-guard/agent image loaded on the nodes (required)")
	fs.StringVar(&c.agnhost, "agnhost", "xila-guard/agnhost:v1.35.4", "agnhost image, present on the nodes")
	fs.StringVar(&c.prober, "prober", "", "the prober binary (go build ./bench/cmd/netpol-bench/prober, CGO_ENABLED=0) (required)")
	fs.StringVar(&c.out, "out", "", "also write the report to this file")
}

func (c *common) check() error {
	for name, v := range map[string]string{"--kubeconfig": c.kubeconfig, "--image-tag": c.imageTag, "--prober": c.prober} {
		if v == "" {
			return fmt.Errorf("%s is required", name)
		}
	}
	return nil
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: netpol-bench propagation|dataplane [flags]")
	}
	switch args[0] {
	case "propagation":
		return runPropagation(ctx, args[1:])
	case "dataplane":
		return runDataplane(ctx, args[1:])
	}
	return fmt.Errorf("unknown measurement %q: want propagation or dataplane", args[0])
}

// env is what a measurement needs of the cluster.
type env struct {
	c       common
	cs      kubernetes.Interface
	workers []string
	log     *log.Logger
	report  io.Writer
}

func newEnv(c common) (*env, func(), error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	rc.QPS, rc.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	e := &env{c: c, cs: cs, log: log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds), report: os.Stdout}
	closeOut := func() {}
	if c.out != "" {
		f, err := os.Create(c.out)
		if err != nil {
			return nil, nil, err
		}
		e.report = io.MultiWriter(os.Stdout, f)
		closeOut = func() { f.Close() }
	}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, n := range nodes.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; !cp {
			e.workers = append(e.workers, n.Name)
		}
	}
	slices.Sort(e.workers)
	if len(e.workers) < 2 {
		return nil, nil, fmt.Errorf("need 2 workers, the cluster has %v", e.workers)
	}
	return e, closeOut, nil
}

func (e *env) printf(format string, args ...any) { fmt.Fprintf(e.report, format, args...) }

// installAgent installs the chart with only the NetworkPolicy agent and
// waits until every agent is Ready (it is Ready after its first reconcile).
func (e *env) installAgent(ctx context.Context) error {
	args := []string{"--kubeconfig", e.c.kubeconfig, "upgrade", "--install", agentRelease, e.c.chart,
		"-n", agentNS, "--create-namespace", "--wait", "--timeout", "3m",
		"--set", "image.tag=" + e.c.imageTag, "--set", "networkPolicy.enabled=true"}
	capBPF, err := nodeHasCapBPF(ctx, e.workers[0])
	if err != nil {
		return err
	}
	if !capBPF {
		args = append(args, "--set", "networkPolicy.extraCapabilities={SYS_ADMIN}")
	}
	if out, err := exec.CommandContext(ctx, e.c.helm, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("helm install: %w\n%s", err, out)
	}
	return nil
}

// uninstallAgent removes the chart and waits until no agent pod is left
// and no node holds the agent's pins: the agent removes its programs and
// maps when its DaemonSet is deleted.
func (e *env) uninstallAgent(ctx context.Context) error {
	if out, err := exec.CommandContext(ctx, e.c.helm, "--kubeconfig", e.c.kubeconfig,
		"uninstall", agentRelease, "-n", agentNS, "--wait", "--ignore-not-found").CombinedOutput(); err != nil {
		return fmt.Errorf("helm uninstall: %w\n%s", err, out)
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := e.cs.CoreV1().Pods(agentNS).List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
		if err != nil || len(pods.Items) > 0 {
			return false, nil
		}
		for _, w := range e.workers {
			if exec.CommandContext(ctx, "docker", "exec", w, "test", "-e", "/sys/fs/bpf/xila-guard").Run() == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// nodeHasCapBPF reads the bounding set of a kind node's init process.
func nodeHasCapBPF(ctx context.Context, node string) (bool, error) {
	out, err := exec.CommandContext(ctx, "docker", "exec", node, "grep", "CapBnd", "/proc/1/status").Output()
	if err != nil {
		return false, fmt.Errorf("reading the capabilities of %s: %w", node, err)
	}
	var bnd uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "CapBnd:")), "%x", &bnd); err != nil {
		return false, fmt.Errorf("parsing %q: %w", out, err)
	}
	const capBPF = 39
	return bnd&(1<<capBPF) != 0, nil
}

// agnhostPod is a pod on a given node running agnhost with args, with the
// named port http on 8080.
func agnhostPod(name, node, image string, labels map[string]string, args ...string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "agnhost", Image: image, ImagePullPolicy: corev1.PullNever, Args: args,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
		},
	}
}

// createNamespace creates a namespace, replacing one left by an earlier run.
func (e *env) createNamespace(ctx context.Context, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for {
		_, err := e.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		e.cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// waitRunning waits until every pod of the namespaces is Running with an
// address, and returns them by namespace/name.
func (e *env) waitRunning(ctx context.Context, namespaces []string, want int, timeout time.Duration) (map[string]*corev1.Pod, error) {
	var got map[string]*corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		got = map[string]*corev1.Pod{}
		for _, ns := range namespaces {
			pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
					got[p.Namespace+"/"+p.Name] = p
				}
			}
		}
		return len(got) >= want, nil
	})
	if err != nil {
		return got, fmt.Errorf("%d of %d pods Running: %w", len(got), want, err)
	}
	return got, nil
}

// loadAverage is the first field of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
