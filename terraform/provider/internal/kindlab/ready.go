package kindlab

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// pollInterval is how often the lab polls the API server; tests shorten it.
var pollInterval = time.Second

func clientset(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("parsing kubeconfig: %w", err)
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// waitNodeNetworks waits until every node in names has registered with a
// pod CIDR and an internal address, and returns them in the order of names.
// A node can register after kind create returns; configuring the nodes
// present at that moment would leave it without pod networking. When ctx
// ends first, the error names each node still missing and why.
func waitNodeNetworks(ctx context.Context, cs kubernetes.Interface, names []string) ([]NodeNetwork, error) {
	var missing []string
	for {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			var out []NodeNetwork
			out, missing = networksOf(nodes.Items, names)
			if len(missing) == 0 {
				return out, nil
			}
		} else {
			missing = []string{"listing nodes: " + err.Error()}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w waiting for %d nodes to register with a pod CIDR: %s", ctx.Err(), len(names), strings.Join(missing, "; "))
		case <-time.After(pollInterval):
		}
	}
}

// networksOf returns the network of every node in names, or says for each
// node that is not ready for networking what it lacks.
func networksOf(items []corev1.Node, names []string) (nets []NodeNetwork, missing []string) {
	byName := make(map[string]corev1.Node, len(items))
	for _, n := range items {
		byName[n.Name] = n
	}
	for _, name := range names {
		n, ok := byName[name]
		if !ok {
			missing = append(missing, fmt.Sprintf("node %s has not registered (its kubelet: docker exec %s journalctl -u kubelet)", name, name))
			continue
		}
		nn := NodeNetwork{Name: name, PodCIDR: n.Spec.PodCIDR}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && nn.InternalIP == "" {
				nn.InternalIP = a.Address
			}
		}
		switch {
		case nn.PodCIDR == "":
			missing = append(missing, fmt.Sprintf("node %s has no spec.podCIDR yet", name))
		case nn.InternalIP == "":
			missing = append(missing, fmt.Sprintf("node %s has no InternalIP yet", name))
		default:
			nets = append(nets, nn)
		}
	}
	return nets, missing
}

// WaitReady waits until want nodes have registered, every node is Ready and
// CoreDNS is available: the state make kind-up ends in.
func WaitReady(ctx context.Context, kubeconfig string, want int) error {
	cs, err := clientset(kubeconfig)
	if err != nil {
		return err
	}
	var last string
	for {
		last = notReady(ctx, cs, want)
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
func notReady(ctx context.Context, cs kubernetes.Interface, want int) string {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	if len(nodes.Items) < want {
		return fmt.Sprintf("%d of %d nodes registered", len(nodes.Items), want)
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
