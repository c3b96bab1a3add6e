package kindlab

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const pollInterval = time.Second

func clientset(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("parsing kubeconfig: %w", err)
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// nodeNetworks waits until every node has a pod CIDR and an internal
// address, and returns them sorted by node name.
func nodeNetworks(ctx context.Context, kubeconfig string) ([]NodeNetwork, error) {
	cs, err := clientset(kubeconfig)
	if err != nil {
		return nil, err
	}
	var last error
	for {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			out, ok := networksOf(nodes.Items)
			if ok {
				return out, nil
			}
			last = fmt.Errorf("waiting for every node to get spec.podCIDR and an InternalIP")
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

func networksOf(items []corev1.Node) ([]NodeNetwork, bool) {
	if len(items) == 0 {
		return nil, false
	}
	var out []NodeNetwork
	for _, n := range items {
		nn := NodeNetwork{Name: n.Name, PodCIDR: n.Spec.PodCIDR}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && nn.InternalIP == "" {
				nn.InternalIP = a.Address
			}
		}
		if nn.PodCIDR == "" || nn.InternalIP == "" {
			return nil, false
		}
		out = append(out, nn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, true
}

// WaitReady waits until every node is Ready and CoreDNS is available, the
// state make kind-up ends in.
func WaitReady(ctx context.Context, kubeconfig string) error {
	cs, err := clientset(kubeconfig)
	if err != nil {
		return err
	}
	var last string
	for {
		last = notReady(ctx, cs)
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// notReady says what is not ready yet, or "" when everything is.
func notReady(ctx context.Context, cs kubernetes.Interface) string {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, n := range nodes.Items {
		if !nodeReady(n) {
			return fmt.Sprintf("node %s is not Ready", n.Name)
		}
	}
	dns, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return "coredns: " + err.Error()
	}
	if !deploymentAvailable(dns) {
		return fmt.Sprintf("coredns has %d of %d replicas available", dns.Status.AvailableReplicas, replicas(dns))
	}
	return ""
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation &&
		d.Status.UpdatedReplicas == replicas(d) &&
		d.Status.AvailableReplicas == replicas(d)
}
