//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// newPodCheck is the name E2E_NETPOL_SCENARIOS matches to run the check.
const newPodCheck = "a new isolated pod is enforced from its first packet"

// checkNewPodFromFirstPacket creates pods whose only container, as soon as
// it starts, connects to the API server's Service address: first one no
// policy selects, which must connect (the destination is reachable from a
// pod's first moments), then one whose namespace denies it all egress,
// which must never get an answer. The container starts before the kubelet
// posts the pod's address, so the second pod is enforced only if the agent
// held its interface from the moment its network came up.
func checkNewPodFromFirstPacket(ctx context.Context, t *testing.T, cfg *envconf.Config, worker string) {
	t.Helper()
	cs := clientset(t, cfg)
	api, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the kubernetes Service: %v", err)
	}
	dest := fmt.Sprintf("%s:%d", api.Spec.ClusterIP, api.Spec.Ports[0].Port)
	ns := envconf.RandomName("xg-first-packet", 24)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	defer func() {
		if err := cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	}()
	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-egress", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"egress": "denied"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		},
	}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s/%s: %v", ns, deny.Name, err)
	}
	// Let the agents see the policy before the pod exists: what is tested
	// is the pod's start, not the policy's propagation.
	time.Sleep(enforceWithin)

	if code, msg := runConnectPod(ctx, t, cs, ns, "open", nil, worker, dest); code != 0 {
		t.Fatalf("a new pod no policy selects could not reach %s at its start (exit %d: %s): the check below would prove nothing", dest, code, msg)
	}
	code, msg := runConnectPod(ctx, t, cs, ns, "isolated", map[string]string{"egress": "denied"}, worker, dest)
	switch {
	case code == 0:
		t.Errorf("a new pod whose egress is denied reached %s when its container started", dest)
	case !strings.Contains(msg, "TIMEOUT"):
		t.Errorf("a new pod whose egress is denied: connecting to %s ended with %q, want TIMEOUT (no packet answered)", dest, msg)
	default:
		t.Logf("%s: the new pod's connection at start timed out, as its policy says", newPodCheck)
	}
}

// runConnectPod runs one pod on node that connects to dest once, at start,
// and returns the container's exit code and its last words.
func runConnectPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, labels map[string]string, node, dest string) (int32, string) {
	t.Helper()
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:                     "connect",
				Image:                    suite.Agnhost,
				ImagePullPolicy:          corev1.PullNever,
				Args:                     []string{"connect", dest, "--timeout=3s"},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	var term *corev1.ContainerStateTerminated
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Terminated != nil {
				term = s.State.Terminated
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s did not finish: %v", ns, name, err)
	}
	return term.ExitCode, strings.TrimSpace(term.Message)
}
