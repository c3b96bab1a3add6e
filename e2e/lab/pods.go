package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/xila-guard/xila-guard/components/api/fixture"
)

// PodOption changes a pod built by Pod.
type PodOption func(*corev1.Pod)

// Pod builds an agnhost pod for the controlled scheduler.
func (c *Cluster) Pod(name string, opts ...PodOption) *corev1.Pod {
	p := fixture.MakePod(name, "").Scheduler(ControlledScheduler).Image(c.Agnhost, corev1.PullNever).Args("pause").Obj()
	p.Spec.TerminationGracePeriodSeconds = new(int64)
	for _, o := range opts {
		o(p)
	}
	return p
}

// WithScheduler names another scheduler.
func WithScheduler(name string) PodOption { return func(p *corev1.Pod) { p.Spec.SchedulerName = name } }

// WithNodeName pins the pod with spec.nodeName, past every scheduler.
func WithNodeName(node string) PodOption { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

// Privileged makes the container privileged.
func Privileged() PodOption {
	return func(p *corev1.Pod) {
		yes := true
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes}
	}
}

// WithLabels adds labels.
func WithLabels(kv map[string]string) PodOption {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for k, v := range kv {
			p.Labels[k] = v
		}
	}
}

// PinnedTo requires the node by affinity, which the scheduler honours.
func PinnedTo(node string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}},
		}}
	}
}

// AdmissionDenial returns the message of an admission webhook's refusal,
// and false for any other error (an RBAC refusal included).
func AdmissionDenial(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	return msg, strings.Contains(msg, "admission webhook") && strings.Contains(msg, "denied the request")
}

// RBACDenial reports whether err is the authorizer's refusal.
func RBACDenial(err error) bool {
	_, admission := AdmissionDenial(err)
	return apierrors.IsForbidden(err) && !admission
}

// WaitPendingWith waits until the scheduler reports the pod unschedulable
// with reason in its message, and fails if the pod gets bound.
func WaitPendingWith(ctx context.Context, kube kubernetes.Interface, ns, name, reason string) error {
	err := WaitPendingMatching(ctx, kube, ns, name, func(msg string) bool { return strings.Contains(msg, reason) })
	if err != nil {
		return fmt.Errorf("want it Pending with %s: %w", reason, err)
	}
	return nil
}

// WaitPendingMatching waits until the scheduler reports the pod
// unschedulable with a message that matches, and fails if the pod gets
// bound.
func WaitPendingMatching(ctx context.Context, kube kubernetes.Interface, ns, name string, matches func(msg string) bool) error {
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if got, err = kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		if got.Spec.NodeName != "" {
			return false, fmt.Errorf("bound to %s", got.Spec.NodeName)
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && matches(c.Message) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w (status: %s)", ns, name, err, DescribeStatus(got))
	}
	return nil
}

// WaitRunning waits until a pod runs and is ready, and returns it.
func WaitRunning(ctx context.Context, kube kubernetes.Interface, ns, name string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s not Running and Ready: %w (status: %s)", ns, name, err, DescribeStatus(pod))
	}
	return pod, nil
}

// DescribeStatus says in one line where a pod stands.
func DescribeStatus(p *corev1.Pod) string {
	if p == nil {
		return "not found"
	}
	parts := []string{string(p.Status.Phase)}
	if p.Spec.NodeName != "" {
		parts = append(parts, "on "+p.Spec.NodeName)
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, string(c.Type)+": "+c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, cs.Name+": "+w.Reason+" "+w.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// DeletePod deletes a pod at once; a pod already gone is no error.
func DeletePod(ctx context.Context, kube kubernetes.Interface, ns, name string) error {
	zero := int64(0)
	err := kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Bind binds a pod to a node through pods/binding, as the client's user.
func Bind(ctx context.Context, kube kubernetes.Interface, ns, pod, node string) error {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	return kube.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{})
}

// ExpectDenied checks that creating a pod is refused by the admission
// webhook with reason in the message.
func (c *Cluster) ExpectDenied(ctx context.Context, kube kubernetes.Interface, ns string, p *corev1.Pod, reason string) error {
	_, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err == nil {
		_ = DeletePod(ctx, c.Kube, ns, p.Name)
		return fmt.Errorf("pod %s was admitted; want it denied with %s", p.Name, reason)
	}
	msg, denied := AdmissionDenial(err)
	if !denied {
		return fmt.Errorf("pod %s: want the webhook's denial with %s, got: %w", p.Name, reason, err)
	}
	if !strings.Contains(msg, reason) {
		return errors.New("pod " + p.Name + ": denied without " + reason + ": " + msg)
	}
	return nil
}

// WithClaimFromTemplate gives the pod a ResourceClaim made from a
// ResourceClaimTemplate of its namespace, for its container.
func WithClaimFromTemplate(template string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: &template})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: "gpu"})
	}
}
