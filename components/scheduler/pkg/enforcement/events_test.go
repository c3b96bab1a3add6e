package enforcement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

func TestQueueingHints(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pl := &Enforcement{settings: settings{poolLabel: guard.LabelTenantPool}}
	p := pod(acmeNS, "train")
	relabelled := poolNode("n", globex)
	tainted := poolNode("n", acme)
	tainted.Spec.Taints = append(tainted.Spec.Taints, corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoSchedule})
	otherLabel := poolNode("n", acme)
	otherLabel.Labels["zone"] = "b"
	cases := []struct {
		name     string
		old, new any
		want     fwk.QueueingHint
	}{
		{"node added", nil, poolNode("n", acme), fwk.Queue},
		{"pool label changed", poolNode("n", acme), relabelled, fwk.Queue},
		{"taints changed", poolNode("n", acme), tainted, fwk.Queue},
		{"other label changed", poolNode("n", acme), otherLabel, fwk.QueueSkip},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pl.isSchedulableAfterNodeChange(logger, p, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Errorf("hint = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if got, _ := isSchedulableAfterPodTolerationChange(logger, p, nil, p); got != fwk.Queue {
		t.Errorf("own toleration change: %v, want Queue", got)
	}
	if got, _ := isSchedulableAfterPodTolerationChange(logger, p, nil, pod(acmeNS, "other")); got != fwk.QueueSkip {
		t.Errorf("other pod's toleration change: %v, want QueueSkip", got)
	}
}
