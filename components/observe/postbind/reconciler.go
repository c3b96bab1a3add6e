package postbind

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// DefaultResync is how often a pod is re-evaluated when nothing it depends
// on changed, so that evidence going stale is reported too.
const DefaultResync = 2 * time.Minute

// EventRecorder records Events; the events.EventRecorder of client-go
// satisfies it.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Observer is what the reconciler reports besides Events and records;
// metrics implement it.
type Observer interface {
	// Evaluated is called after each evaluation, with its latency and
	// whether the evaluator answered.
	Evaluated(result wire.NodeResult, latency time.Duration, answered bool)
	// Drifted is called for each drift record.
	Drifted(from, to guard.Decision)
}

// Reconciler evaluates bound, protected pods against their nodes.
type Reconciler struct {
	// Client reads pods, nodes, namespaces and the Xila Guard objects.
	Client client.Reader
	// Evaluator decides.
	Evaluator Evaluator
	// Profile is asked of the evaluator; empty means the evaluator's own.
	Profile guard.Profile
	// Recorder records Events on pods.
	Recorder EventRecorder
	// Sink receives the JSON records.
	Sink *Sink
	// Observer, when set, is told about evaluations and drift.
	Observer Observer
	// Reports, when set, keeps the namespaces' PolicyReports in step with
	// the decisions.
	Reports *PolicyReports
	// Resync re-evaluates every pod on this period; DefaultResync when zero.
	Resync time.Duration
	// Clock defaults to the system clock.
	Clock clock.PassiveClock

	mu   sync.Mutex
	last map[types.NamespacedName]verdict
}

// verdict is the previous decision about a pod, to tell drift.
type verdict struct {
	uid      types.UID
	node     string
	decision guard.Decision
	reasons  []guard.Reason
}

var _ reconcile.Reconciler = &Reconciler{}

// Reconcile evaluates one pod and reports what is not allowed or changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			r.Forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading pod %s: %w", req, err)
	}
	if !bound(pod) {
		r.Forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pod.Namespace}, ns); err != nil {
		return reconcile.Result{}, fmt.Errorf("reading namespace %s: %w", pod.Namespace, err)
	}
	id, err := resolveIdentity(ctx, r.Client, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !id.protected {
		r.Forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	node, err := Candidate(ctx, r.Client, pod.Spec.NodeName)
	if err != nil {
		return reconcile.Result{}, err
	}
	req2 := &wire.EvaluateRequest{Profile: r.Profile, Pod: wire.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Tenant: id.tenant, Policy: id.policy, Nodes: []wire.Node{node}, DevicesByClaim: devices.ByClaim(pod)}
	start := r.now()
	res, err := r.Evaluator.Evaluate(ctx, req2)
	if err != nil {
		res = Failure(node.Name, err)
	}
	if r.Observer != nil {
		r.Observer.Evaluated(res, r.now().Sub(start), err == nil)
	}
	if r.Reports != nil {
		r.Reports.observe(pod, id, res)
	}
	if err := r.report(pod, id, res); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.resync()}, nil
}

// Candidate builds the evaluator's view of a node: its UID, pool, GPUs on
// offer and the spec of its NodeSecurityState. A node or state that does
// not exist is left out for the evaluator to judge.
func Candidate(ctx context.Context, c client.Reader, name string) (wire.Node, error) {
	out := wire.Node{Name: name}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err == nil {
		out = wire.NodeOf(node, node.Labels[guard.LabelTenantPool])
	} else if !apierrors.IsNotFound(err) {
		return out, fmt.Errorf("reading node %s: %w", name, err)
	}
	nss := &v1alpha1.NodeSecurityState{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, nss); err == nil {
		out.State = &nss.Spec
	} else if !apierrors.IsNotFound(err) {
		return out, fmt.Errorf("reading the state of node %s: %w", name, err)
	}
	return out, nil
}

// report compares the result with the previous one and writes an Event and
// a record when the pod runs where it should not, or when the decision
// changed.
func (r *Reconciler) report(pod *corev1.Pod, id identity, res wire.NodeResult) error {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	now := verdict{uid: pod.UID, node: pod.Spec.NodeName, decision: res.Decision, reasons: res.Reasons}
	r.mu.Lock()
	if r.last == nil {
		r.last = map[types.NamespacedName]verdict{}
	}
	prev, seen := r.last[key]
	seen = seen && prev.uid == pod.UID
	r.last[key] = now
	r.mu.Unlock()

	rec := &Record{Time: r.now().UTC(), Namespace: pod.Namespace, Pod: pod.Name, Node: pod.Spec.NodeName,
		Scheduler: pod.Spec.SchedulerName, Decision: res.Decision, Reasons: res.Reasons,
		Incarnation: res.Incarnation, Message: res.Message}
	if id.tenant != nil {
		rec.Tenant = id.tenant.ID
	}
	switch {
	case seen && prev.node == now.node && prev.decision == now.decision && slices.Equal(prev.reasons, now.reasons):
		return nil
	case seen:
		rec.Kind, rec.PreviousDecision = KindDrift, prev.decision
		if r.Observer != nil {
			r.Observer.Drifted(prev.decision, now.decision)
		}
	case res.Decision == guard.DecisionAllow:
		return nil
	default:
		rec.Kind = KindViolation
	}
	if res.Decision != guard.DecisionAllow {
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, guard.EventReasonPolicyViolation, "Evaluate",
			"%s on node %s: %s (%s)", res.Decision, pod.Spec.NodeName, joinReasons(res.Reasons), res.Message)
	}
	return r.Sink.Write(rec)
}

// Forget drops what is remembered about a pod that is gone or no longer
// protected; it then starts afresh.
func (r *Reconciler) Forget(pod types.NamespacedName) {
	r.mu.Lock()
	delete(r.last, pod)
	r.mu.Unlock()
	if r.Reports != nil {
		r.Reports.forget(pod)
	}
}

// bound reports whether the pod is on a node and not finished.
func bound(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.DeletionTimestamp.IsZero() &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func joinReasons(rs []guard.Reason) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *Reconciler) resync() time.Duration {
	if r.Resync <= 0 {
		return DefaultResync
	}
	return r.Resync
}
