package lab

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
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
// measurement.
func ConfidentialValues(tampered string) map[string]any {
	sel := map[string]any{"node-role.kubernetes.io/control-plane": ""}
	tol := []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}}
	return map[string]any{"confidential": map[string]any{
		"enabled": true,
		"profile": "lab",
		"referenceValues": map[string]any{"measurements": []any{
			map[string]any{"tee": "SEV-SNP", "measurement": AllowedMeasurement},
		}},
		"controller": map[string]any{"interval": "10s", "nodeSelector": sel, "tolerations": tol},
		"attester": map[string]any{
			"backend": "lab",
			"lab":     map[string]any{"measurement": AllowedMeasurement, "nodeMeasurements": map[string]any{tampered: TamperedMeasurement}},
		},
	}}
}

// attestedPhase installs the attestation controller, gives the tenant a
// policy that requires an attested SEV-SNP launch with the allowed
// measurement, and shows placement on attested evidence: pods run on
// worker 1 only, and a pod pinned to worker 2, whose lab TEE states
// another measurement, stays Pending. It puts the tenant's mock evidence
// and policy back when it ends.
func (l *Lab) attestedPhase() Phase {
	t := l.Tenant
	return Phase{
		Name: "attested evidence", Want: "Scheduled to worker 1 only, on its verified report; worker 2 Pending, MEASUREMENT_NOT_ALLOWED",
		Run: func(ctx context.Context) (got string, err error) {
			defer func() { err = errors.Join(err, l.restoreMockEvidence(ctx)) }()
			if err := l.InstallChart(ctx, Merge(l.Values("lab"), ConfidentialValues(t.Workers[TimeSlicedWorker]))); err != nil {
				return "", err
			}
			if err := l.setPolicy(ctx, t.Name, map[string]any{
				"confinement": "Pool",
				"evidence":    map[string]any{"acceptedSources": []any{"attested"}},
				"confidentialComputing": map[string]any{
					"teeTypes": []any{"SEV-SNP"}, "allowedMeasurements": []any{AllowedMeasurement}, "requireAttestation": true,
				},
			}); err != nil {
				return "", err
			}
			for _, w := range t.Workers {
				if err := l.waitAttested(ctx, w); err != nil {
					return "", err
				}
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
			return fmt.Sprintf("Scheduled to worker 1 only (2 pods on %s, attested SEV-SNP %s…); worker 2 (%s…) Pending, MEASUREMENT_NOT_ALLOWED",
				t.Workers[CompliantWorker], AllowedMeasurement[:19], TamperedMeasurement[:19]), nil
		},
	}
}

// waitAttested waits until the node's NodeSecurityState is attested
// evidence with a verdict.
func (l *Lab) waitAttested(ctx context.Context, node string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := l.Dyn.Resource(States).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		source, _, _ := unstructured.NestedString(u.Object, "spec", "source")
		verdict, _, _ := unstructured.NestedString(u.Object, "spec", "tee", "attestation", "verdict")
		last = fmt.Sprintf("source %q, verdict %q", source, verdict)
		return source == "attested" && verdict != "", nil
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
	if err := l.setPolicy(ctx, l.Tenant.Name, poolPolicy()); err != nil {
		return err
	}
	return l.Tenant.mockEvidence(ctx)
}
