package lab

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lab is the cluster, its tenant and the user who acts for the tenant.
type Lab struct {
	*Cluster
	Tenant *Tenant
	User   string
	// Overrides are chart values merged over every install of Values,
	// e.g. nameOverride and fullnameOverride.
	Overrides map[string]any
}

// Values are the chart values of the lab in a profile: enforcement, the
// webhook, tenant RBAC for the lab's user, the platform on the control
// plane, and the lab's Overrides.
func (l *Lab) Values(profile string) map[string]any {
	return Merge(PlatformOnControlPlane(), TenantRBACValues(l.Tenant.Name, l.User), map[string]any{
		"enforcement": map[string]any{"enabled": true, "profile": profile},
		"webhook":     map[string]any{"enabled": true, "devices": true},
	}, l.Overrides)
}

// Phase is one step of the demo: what it shows and how to check it.
type Phase struct {
	Name string
	Want string
	// Run returns what happened, in the words of Want, and an error when
	// it is not what Want says.
	Run func(ctx context.Context) (string, error)
}

// Phases are the six phases of make demo, in order. Each installs what
// it needs, so they run one after the other on a fresh tenant.
func (l *Lab) Phases() []Phase {
	t := l.Tenant
	return []Phase{
		{
			Name: "production profile", Want: "pod Pending, SOURCE_NOT_ACCEPTED",
			Run: func(ctx context.Context) (string, error) {
				if err := l.InstallChart(ctx, l.Values("production")); err != nil {
					return "", err
				}
				p, err := l.Kube.CoreV1().Pods(t.Name).Create(ctx, l.Pod("production"), metav1.CreateOptions{})
				if err != nil {
					return "", err
				}
				if err := WaitPendingWith(ctx, l.Kube, t.Name, p.Name, "SOURCE_NOT_ACCEPTED"); err != nil {
					return "", err
				}
				return "pod Pending, SOURCE_NOT_ACCEPTED", DeletePod(ctx, l.Kube, t.Name, p.Name)
			},
		},
		{
			Name: "lab profile", Want: "Scheduled to worker 1 only",
			Run: func(ctx context.Context) (string, error) {
				if err := l.InstallChart(ctx, l.Values("lab")); err != nil {
					return "", err
				}
				if err := l.runOnCompliantWorker(ctx, "lab", 3); err != nil {
					return "", err
				}
				return fmt.Sprintf("Scheduled to worker 1 only (3 pods on %s)", t.Workers[CompliantWorker]), nil
			},
		},
		{
			Name: "pinned to worker 2", Want: "pod Pending, TIME_SLICING_FORBIDDEN",
			Run: func(ctx context.Context) (string, error) {
				p, err := l.Kube.CoreV1().Pods(t.Name).Create(ctx, l.Pod("pinned", PinnedTo(t.Workers[TimeSlicedWorker])), metav1.CreateOptions{})
				if err != nil {
					return "", err
				}
				if err := WaitPendingWith(ctx, l.Kube, t.Name, p.Name, "TIME_SLICING_FORBIDDEN"); err != nil {
					return "", err
				}
				// Why is it Pending? One command answers, node by node.
				w1, w2 := t.Workers[CompliantWorker], t.Workers[TimeSlicedWorker]
				if _, err := l.ExplainPending(ctx, "lab", t.Name, p.Name, w2, "TIME_SLICING_FORBIDDEN", w1); err != nil {
					return "", err
				}
				return fmt.Sprintf("pod Pending, TIME_SLICING_FORBIDDEN (kubectl xila-guard explain: %s deny, %s allow)", w2, w1), DeletePod(ctx, l.Kube, t.Name, p.Name)
			},
		},
		{
			Name: "webhook", Want: "alternate scheduler, nodeName, privileged all DENIED",
			Run: func(ctx context.Context) (string, error) {
				var got []string
				for _, c := range WebhookCases(t) {
					if err := l.ExpectDenied(ctx, l.Kube, t.Name, l.Pod(c.Pod, c.Options...), c.Reason); err != nil {
						return "", err
					}
					got = append(got, c.Name+" DENIED ("+c.Reason+")")
				}
				return strings.Join(got, ", "), nil
			},
		},
		{
			Name: "RBAC", Want: "tenant can create pods, everything else DENIED",
			Run: func(ctx context.Context) (string, error) {
				matrix, err := l.TenantRBACMatrix(ctx, t, l.User)
				if err != nil {
					return "", err
				}
				var allowed, denied, wrong []string
				for _, a := range matrix {
					switch {
					case !a.OK():
						wrong = append(wrong, a.String())
					case a.Allowed:
						allowed = append(allowed, a.Action)
					default:
						denied = append(denied, a.Action)
					}
				}
				if len(wrong) > 0 {
					return "", fmt.Errorf("as %s: %s", l.User, strings.Join(wrong, "; "))
				}
				return fmt.Sprintf("tenant can %s; %d other requests DENIED (%s)", strings.Join(allowed, ", "), len(denied), strings.Join(denied, ", ")), nil
			},
		},
		l.AttestedPhase(),
	}
}

// runOnCompliantWorker creates n pods of the tenant, named prefix-<i>, and
// checks that each runs on worker 1.
func (l *Lab) runOnCompliantWorker(ctx context.Context, prefix string, n int) error {
	t := l.Tenant
	var on []string
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := l.Kube.CoreV1().Pods(t.Name).Create(ctx, l.Pod(name), metav1.CreateOptions{}); err != nil {
			return err
		}
		p, err := WaitRunning(ctx, l.Kube, t.Name, name)
		if err != nil {
			return err
		}
		on = append(on, p.Spec.NodeName)
	}
	for _, node := range on {
		if node != t.Workers[CompliantWorker] {
			return fmt.Errorf("pods ran on %v, want all on worker 1 (%s)", on, t.Workers[CompliantWorker])
		}
	}
	return nil
}

// WebhookCase is a pod the webhook must refuse in a tenant's namespace.
type WebhookCase struct {
	Name    string
	Pod     string
	Options []PodOption
	Reason  string
}

// WebhookCases are the ways around the controlled scheduler that phase 4
// tries.
func WebhookCases(t *Tenant) []WebhookCase {
	return []WebhookCase{
		{"alternate scheduler", "alternate-scheduler", []PodOption{WithScheduler("default-scheduler")}, "SCHEDULER_NOT_ALLOWED"},
		{"nodeName", "node-name", []PodOption{WithNodeName(t.Workers[CompliantWorker])}, "NODE_NAME_SET"},
		{"privileged", "privileged", []PodOption{Privileged()}, "PRIVILEGED_CONTAINER"},
	}
}
