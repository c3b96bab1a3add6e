package lab

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// LabMeasurement is the lab launch measurement of a workload image.
func LabMeasurement(workload string) string {
	m := sha512.Sum384([]byte(workload))
	return "sha384:" + hex.EncodeToString(m[:])
}

// The launch measurements of the attested phase: worker 1's lab TEE
// states the allowed one, worker 2's another.
var (
	AllowedMeasurement  = LabMeasurement("xila-guard lab confidential workload v1")
	TamperedMeasurement = LabMeasurement("xila-guard lab confidential workload v1, patched")
)

// ConfidentialValues are the chart values of the attestation controller
// with lab attesters on every node: the lab profile, the allowed
// measurement as the only reference value, and tampered stating the other
// measurement; and the TEE taints, kept by the observe controller.
func ConfidentialValues(tampered string) map[string]any {
	sel := map[string]any{"node-role.kubernetes.io/control-plane": ""}
	tol := []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}}
	return map[string]any{
		// The observe controller keeps the TEE taints only: the lab writes
		// its own evidence, and the pool taints are the lab's too.
		"observe": map[string]any{"enabled": true, "replicas": 1, "profile": "lab", "publishEvidence": false,
			"complianceLabels": false, "nodeSelector": sel, "tolerations": tol},
		"confidential": map[string]any{
			"enabled":   true,
			"profile":   "lab",
			"teeTaints": true,
			"referenceValues": map[string]any{"measurements": []any{
				map[string]any{"tee": "SEV-SNP", "measurement": AllowedMeasurement},
			}},
			"controller": map[string]any{"interval": "10s", "nodeSelector": sel, "tolerations": tol},
			"attester": map[string]any{
				// The workers only: an attested control plane would carry the
				// TEE taint too, which the platform's own pods do not tolerate.
				"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
					"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
						map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}}}}}}},
				"backend": "lab",
				"lab":     map[string]any{"measurement": AllowedMeasurement, "nodeMeasurements": map[string]any{tampered: TamperedMeasurement}},
			},
		}}
}

// AttestedPhase, phase 6 of make demo, installs the attestation controller, gives the tenant a
// policy that requires an attested SEV-SNP launch with the allowed
// measurement, and shows placement on attested evidence: pods run on
// worker 1 only, and a pod pinned to worker 2, whose lab TEE states
// another measurement, stays Pending. It puts the tenant's mock evidence
// and policy back when it ends.
func (l *Lab) AttestedPhase() Phase {
	t := l.Tenant
	return Phase{
		Name: "attested evidence", Want: "both workers tainted " + teeTaint + ", a pod whose policy asks for no TEE Pending on the taint; Scheduled to worker 1 only, on its verified report; worker 2 Pending, MEASUREMENT_NOT_ALLOWED",
		Run: func(ctx context.Context) (got string, err error) {
			defer func() { err = errors.Join(err, l.restoreMockEvidence(ctx)) }()
			if err := l.InstallChart(ctx, Merge(l.Values("lab"), ConfidentialValues(t.Workers[TimeSlicedWorker]))); err != nil {
				return "", err
			}
			// First a policy that accepts attested evidence but asks for no
			// TEE: its pods get no toleration, and the TEE taint keeps them
			// off both workers.
			if err := l.Replace(ctx, fixture.MakePlacementPolicy(t.Name, v1alpha1.SourceAttested).Obj()); err != nil {
				return "", err
			}
			for _, w := range t.Workers {
				if err := l.waitAttested(ctx, w); err != nil {
					return "", err
				}
				if err := l.waitTaint(ctx, w, teeTaintKey, "SEV-SNP"); err != nil {
					return "", err
				}
			}
			plain, err := l.Kube.CoreV1().Pods(t.Name).Create(ctx, l.Pod("no-tee"), metav1.CreateOptions{})
			if err != nil {
				return "", err
			}
			if err := WaitPendingWith(ctx, l.Kube, t.Name, plain.Name, teeTaintKey); err != nil {
				return "", err
			}
			if err := DeletePod(ctx, l.Kube, t.Name, plain.Name); err != nil {
				return "", err
			}
			policy := fixture.MakePlacementPolicy(t.Name, v1alpha1.SourceAttested).
				TEE(v1alpha1.TEESEVSNP).Measurements(v1alpha1.Measurement(AllowedMeasurement)).RequireAttestation(0)
			if err := l.Replace(ctx, policy.Obj()); err != nil {
				return "", err
			}
			// The webhook tolerates the taint for the policy's pods once its
			// cache has the policy: a dry run shows when.
			if err := l.waitTolerated(ctx, t.Name, "SEV-SNP"); err != nil {
				return "", err
			}
			if err := l.runOnCompliantWorker(ctx, "attested", 2); err != nil {
				return "", err
			}
			p, err := l.Kube.CoreV1().Pods(t.Name).Create(ctx, l.Pod("attested-pinned", PinnedTo(t.Workers[TimeSlicedWorker])), metav1.CreateOptions{})
			if err != nil {
				return "", err
			}
			if err := WaitPendingWith(ctx, l.Kube, t.Name, p.Name, "MEASUREMENT_NOT_ALLOWED"); err != nil {
				return "", err
			}
			return fmt.Sprintf("both workers tainted %s, a pod whose policy asks for no TEE Pending on the taint; "+
				"Scheduled to worker 1 only (2 pods on %s, attested SEV-SNP %s…); worker 2 (%s…) Pending, MEASUREMENT_NOT_ALLOWED",
				teeTaint, t.Workers[CompliantWorker], AllowedMeasurement[:19], TamperedMeasurement[:19]), nil
		},
	}
}

// The TEE taint the observe controller keeps on attested SEV-SNP nodes.
const (
	teeTaintKey = "guard.xila.us/tee"
	teeTaint    = teeTaintKey + "=SEV-SNP:NoSchedule"
)

// waitTaint waits until the node carries the NoSchedule taint key=value.
func (l *Lab) waitTaint(ctx context.Context, node, key, value string) error {
	var last []corev1.Taint
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := l.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n.Spec.Taints
		for _, t := range n.Spec.Taints {
			if t.Key == key && t.Value == value && t.Effect == corev1.TaintEffectNoSchedule {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s has no taint %s=%s:NoSchedule: %w (taints %v)", node, key, value, err, last)
	}
	return nil
}

// waitTolerated waits until a pod created in the namespace (a server-side
// dry run, which runs the mutating webhooks) gets the toleration of the TEE
// taint with the value.
func (l *Lab) waitTolerated(ctx context.Context, ns, value string) error {
	var last []corev1.Toleration
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := l.Kube.CoreV1().Pods(ns).Create(ctx, l.Pod("tolerated"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil
		}
		last = p.Spec.Tolerations
		for _, t := range p.Spec.Tolerations {
			if t.Key == teeTaintKey && t.Value == value && t.Effect == corev1.TaintEffectNoSchedule {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("pods of namespace %s get no toleration of %s=%s: %w (tolerations %v)", ns, teeTaintKey, value, err, last)
	}
	return nil
}

// removeTEETaints removes the TEE taints the observe controller put on the
// tenant's workers: uninstalled, it leaves them, as it leaves pool taints.
func (l *Lab) removeTEETaints(ctx context.Context) error {
	for _, w := range l.Tenant.Workers {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := l.Kube.CoreV1().Nodes().Get(ctx, w, metav1.GetOptions{})
			if err != nil {
				return err
			}
			kept := n.Spec.Taints[:0]
			for _, t := range n.Spec.Taints {
				if t.Key != teeTaintKey {
					kept = append(kept, t)
				}
			}
			n.Spec.Taints = kept
			_, err = l.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("removing the TEE taint of %s: %w", w, err)
		}
	}
	return nil
}

// waitAttested waits until the node's NodeSecurityState is attested
// evidence with a verdict.
func (l *Lab) waitAttested(ctx context.Context, node string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := l.State(ctx, node)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var verdict v1alpha1.AttestationVerdict
		if s.Spec.TEE != nil && s.Spec.TEE.Attestation != nil {
			verdict = s.Spec.TEE.Attestation.Verdict
		}
		last = fmt.Sprintf("source %q, verdict %q", s.Spec.Source, verdict)
		return s.Spec.Source == v1alpha1.SourceAttested && verdict != "", nil
	})
	if err != nil {
		return fmt.Errorf("node %s not attested: %w (last: %s)", node, err, last)
	}
	return nil
}

// restoreMockEvidence removes the attestation controller and gives the
// tenant its mock evidence and pool policy back, for the phases of a run
// that follows.
func (l *Lab) restoreMockEvidence(ctx context.Context) error {
	zero := int64(0)
	if err := l.Kube.CoreV1().Pods(l.Tenant.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{}); err != nil {
		return err
	}
	if err := l.InstallChart(ctx, l.Values("lab")); err != nil {
		return err
	}
	if err := l.removeTEETaints(ctx); err != nil {
		return err
	}
	if err := l.Replace(ctx, PoolPolicy(l.Tenant.Name).Obj()); err != nil {
		return err
	}
	return l.Tenant.mockEvidence(ctx)
}
