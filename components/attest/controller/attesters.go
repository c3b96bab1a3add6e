package controller

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AttesterPortName is the name of the container port an attester pod
// serves on; the controller falls back to Attesters.Port when the pod
// names none.
const AttesterPortName = "attest"

// IndexNodeName indexes pods by the node they run on.
const IndexNodeName = "spec.nodeName"

// Attesters says where the attester pods are and how to reach them.
type Attesters struct {
	// Namespace holds the attester pods.
	Namespace string
	// Selector picks them by label.
	Selector labels.Selector
	// Port is the attester's port when its pod names no AttesterPortName
	// container port.
	Port int32
	// Scheme is http or https.
	Scheme string
}

// matches reports whether pod is an attester.
func (a *Attesters) matches(pod *corev1.Pod) bool {
	return pod.Namespace == a.Namespace && a.Selector.Matches(labels.Set(pod.Labels))
}

// on returns the attester that serves node: a running, ready attester pod
// on the node with an IP, the newest when a rollout leaves two. It
// returns nil when the node has none.
func (a *Attesters) on(ctx context.Context, c client.Reader, node string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(a.Namespace), client.MatchingLabelsSelector{Selector: a.Selector},
		client.MatchingFields{IndexNodeName: node}); err != nil {
		return nil, fmt.Errorf("listing the attesters on node %s: %w", node, err)
	}
	var best *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node || !serving(p) {
			continue
		}
		if best == nil || p.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			p.CreationTimestamp.Equal(&best.CreationTimestamp) && p.Name > best.Name {
			best = p
		}
	}
	return best, nil
}

// serving reports whether an attester pod can answer.
func serving(p *corev1.Pod) bool {
	if !p.DeletionTimestamp.IsZero() || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// url is the base URL of an attester pod.
func (a *Attesters) url(p *corev1.Pod) string {
	port := a.Port
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == AttesterPortName {
				port = cp.ContainerPort
			}
		}
	}
	return a.Scheme + "://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port)))
}
