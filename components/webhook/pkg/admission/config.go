package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Identity is who a namespace's pods belong to.
type Identity struct {
	// Protected is true when the namespace carries the tenant label or is
	// listed by a TenantBinding.
	Protected bool
	// Tenant is nil when the tenant of a protected namespace could not be
	// resolved.
	Tenant *wire.Tenant
	// Policy is nil when no PlacementPolicy applies.
	Policy *wire.Policy
	// Note says why the tenant or the policy is missing.
	Note string
	// Labelled is true when the namespace carries the tenant label: the
	// chart's configuration then sends every pod of it to the webhook.
	// The pods of a protected namespace without it are judged again at
	// bind time.
	Labelled bool
}

// Cluster is what the rules read about the cluster. The real one is backed
// by informers; reads never block on the API server except for a
// namespace the caches have not seen yet.
type Cluster interface {
	// Synced reports whether every cache has been filled once.
	Synced() bool
	// Identity resolves the tenant and policy of a namespace's pods.
	Identity(ctx context.Context, namespace string) (Identity, error)
	// Node returns the named node, and false when it is not known.
	Node(name string) (*corev1.Node, bool)
	// TenantPodsOn lists, as namespace/name, the pods of protected
	// namespaces bound to the node that have not terminated.
	TenantPodsOn(ctx context.Context, node string) ([]string, error)
	// State returns the evidence of the named node, and false when it has
	// no NodeSecurityState.
	State(node string) (*v1alpha1.NodeSecurityStateSpec, bool)
	// Pod reads a pod from the API server.
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// Evaluator is the evaluator library linked in-process;
// *evaluate.Evaluator is one. It decides a protected pod's
// node-independent verdict at CREATE, and every binding for its node.
type Evaluator interface {
	Evaluate(req *wire.EvaluateRequest) *wire.EvaluateResponse
}

// Config configures a Validator.
type Config struct {
	// PoolLabel is the node label, and taint key, that puts a node in a
	// tenant's pool.
	PoolLabel string
	// SchedulerProfiles maps each external scheduler accepted for protected
	// pods, besides xila-guard-scheduler, to the label selectors of its
	// orchestrator profiles' workloads: a protected pod may name it only
	// when its labels match one of them.
	SchedulerProfiles map[string][]string
	// TrustedServiceAccounts are service account user names
	// (system:serviceaccount:<ns>:<name>) of infrastructure DaemonSets.
	// A pod running as one may target pools only when it is a DaemonSet's
	// pod (its controller is a DaemonSet) created by a DaemonSetController:
	// the account is trusted for its DaemonSet's pods on every node, not
	// for any pod someone creates with it. It binds nothing.
	TrustedServiceAccounts []string
	// DaemonSetControllers are the user names that create DaemonSet pods:
	// kube-controller-manager's daemon-set-controller account, or the
	// controller manager itself without --use-service-account-credentials.
	// DefaultDaemonSetControllers when empty.
	DaemonSetControllers []string
	// Binders are the user names allowed to bind protected pods and to bind
	// pods to pool nodes: the controlled scheduler's service account and
	// those of accepted external schedulers.
	Binders []string
	// RecordBinders are binders (of orchestrator integrations) whose
	// bindings get, from RecordsPath, the record of the evidence they are
	// judged on (guard.AnnotationBoundEvidence), as the controlled
	// scheduler writes it at PreBind: the key broker releases keys only to
	// pods that carry it.
	RecordBinders []string
	// ReportBinders are binders (of integrations with bindEnforcement
	// Report) whose bindings are allowed, and logged, when the node-scoped
	// judgement would refuse them; the observe controller reports them.
	ReportBinders []string
	// Cluster reads the cluster.
	Cluster Cluster
	// Devices reads ResourceSlices and allocated ResourceClaims for the
	// device rules (ClaimsPath); nil when device enforcement is off, which
	// refuses whatever reaches ClaimsPath.
	Devices Devices
	// GPUSettings reads the GPU controller's settings for the rule that
	// hands a claim of a GPU for VMs only to the launcher pods of a VMI
	// holding a device of it; nil when GPUs for VMs are off.
	GPUSettings GPUSettings
	// Evaluator decides protected pods at CREATE and every binding of a
	// protected pod, or onto a pool node, for its node.
	Evaluator Evaluator
	// Profile is the evaluator profile asked for; production when empty.
	Profile guard.Profile
	// Metrics records requests; nil records nothing.
	Metrics *Metrics
	// Logger receives one line per refusal; nil discards.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	var errs []error
	if c.PoolLabel == "" {
		errs = append(errs, errors.New("the pool label must not be empty"))
	}
	if c.Cluster == nil {
		errs = append(errs, errors.New("a cluster reader is required"))
	}
	if c.Evaluator == nil {
		errs = append(errs, errors.New("an in-process evaluator is required"))
	}
	if c.Profile != "" && !c.Profile.IsValid() {
		errs = append(errs, fmt.Errorf("profile %q: want production or lab", c.Profile))
	}
	for name, sels := range c.SchedulerProfiles {
		for _, s := range sels {
			if _, err := labels.Parse(s); err != nil {
				errs = append(errs, fmt.Errorf("scheduler profile %s: selector %q: %w", name, s, err))
			}
		}
	}
	for _, u := range append(append(append(append([]string{}, c.TrustedServiceAccounts...), c.Binders...), c.ReportBinders...), c.RecordBinders...) {
		if _, err := ParseServiceAccount(u); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serviceAccountPrefix starts the user name of every service account.
const serviceAccountPrefix = "system:serviceaccount:"

// ParseServiceAccount turns "<namespace>:<name>" or
// "system:serviceaccount:<namespace>:<name>" into the service account's
// user name, system:serviceaccount:<namespace>:<name>.
func ParseServiceAccount(s string) (string, error) {
	rest := strings.TrimPrefix(strings.TrimSpace(s), serviceAccountPrefix)
	ns, name, ok := strings.Cut(rest, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return "", fmt.Errorf("service account %q: want <namespace>:<name> or system:serviceaccount:<namespace>:<name>", s)
	}
	return serviceAccountPrefix + ns + ":" + name, nil
}

// podServiceAccount is the user name of the service account a pod runs as.
// The ServiceAccount admission plugin sets "default" before webhooks run;
// an empty name means the same here.
func podServiceAccount(namespace string, pod *corev1.Pod) string {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return serviceAccountPrefix + namespace + ":" + sa
}

// DefaultDaemonSetControllers are the users kube-controller-manager creates
// DaemonSet pods as: its daemon-set-controller service account with
// --use-service-account-credentials (kubeadm's default), else its own.
var DefaultDaemonSetControllers = []string{
	"system:serviceaccount:kube-system:daemon-set-controller",
	"system:kube-controller-manager",
}

// acceptedSchedulers returns the scheduler names protected pods may use,
// sorted after xila-guard-scheduler.
func (c *Config) acceptedSchedulers() []string {
	names := make([]string, 0, len(c.SchedulerProfiles))
	for name := range c.SchedulerProfiles {
		names = append(names, name)
	}
	slices.Sort(names)
	return append([]string{guard.SchedulerName}, names...)
}
