package postbind

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/policyreport/v1alpha2"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=get;list;watch;create;update;patch;delete

// DefaultSettle is how long a namespace's report waits, at most, for its
// protected pods that have not been evaluated yet, as after a start.
const DefaultSettle = 30 * time.Second

// PolicyReports keeps one wgpolicyk8s.io/v1alpha2 PolicyReport, named
// PolicyReportName, in every namespace with protected pods: one result per
// bound protected pod, from the Reconciler's latest decision about it. It
// holds nothing that the cluster cannot rebuild: after a start the
// Reconciler evaluates every protected pod again, and a report is written
// only once every bound pod of its namespace has been evaluated (or
// Settle has passed), so a restart leaves the reports as they were.
type PolicyReports struct {
	// Client reads pods, namespaces and the guard objects, and reads and
	// writes the reports.
	Client client.Client
	// Settle is how long a report waits for pods not evaluated yet;
	// DefaultSettle when zero.
	Settle time.Duration
	// Clock defaults to the system clock.
	Clock clock.PassiveClock

	mu       sync.Mutex
	findings map[types.NamespacedName]finding
	// waiting holds the namespaces whose report waits for evaluations,
	// and since when.
	waiting map[string]time.Time
	// queue is the controller's, once it started; dirty holds the
	// namespaces changed before.
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	dirty map[string]bool
}

var _ reconcile.Reconciler = &PolicyReports{}

// PolicyReportCache is how the manager's cache must hold PolicyReports
// (cache.Options.ByObject): only the ones this controller keeps, for other
// engines' reports can be many and large.
func PolicyReportCache() cache.ByObject {
	return cache.ByObject{Label: labels.SelectorFromSet(labels.Set{labelManagedBy: managedBy})}
}

// SetupWithManager registers the report writer. It fails when the cluster
// serves no wgpolicyk8s.io/v1alpha2 PolicyReport: reports were asked for
// and cannot be written, which a start that fails says loudest. Call it
// after the Reconciler's SetupWithManager, whose indexes it reads.
func (p *PolicyReports) SetupWithManager(mgr ctrl.Manager) error {
	gk := schema.GroupKind{Group: v1alpha2.GroupName, Kind: "PolicyReport"}
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, v1alpha2.GroupVersion.Version); meta.IsNoMatchError(err) {
		return fmt.Errorf("the cluster serves no %s PolicyReport: install its CRD (the chart's observe.policyReports.installCRD, Kyverno or policy-reporter) or turn policy reports off", v1alpha2.GroupVersion)
	} else if err != nil {
		return fmt.Errorf("looking up the PolicyReport API: %w", err)
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetName() == PolicyReportName && o.GetLabels()[labelManagedBy] == managedBy
	})
	return ctrl.NewControllerManagedBy(mgr).Named("policy-reports").
		WatchesRawSource(p).
		Watches(&v1alpha2.PolicyReport{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{namespaceRequest(o.GetNamespace())}
		}), builder.WithPredicates(ours)).
		Complete(p)
}

// Start implements source.Source: the findings' changes enqueue their
// namespace.
func (p *PolicyReports) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = q
	for ns := range p.dirty {
		q.Add(namespaceRequest(ns))
	}
	p.dirty = nil
	return nil
}

var _ source.Source = &PolicyReports{}

// observe records the decision about a pod.
func (p *PolicyReports) observe(pod *corev1.Pod, id identity, res wire.NodeResult) {
	f := finding{uid: pod.UID, node: pod.Spec.NodeName, policy: PolicyUnresolved,
		decision: res.Decision, reasons: append([]guard.Reason(nil), res.Reasons...), message: res.Message}
	if id.tenant != nil {
		f.tenant = id.tenant.ID
	}
	if id.policy != nil {
		f.policy = id.policy.Name
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.findings == nil {
		p.findings = map[types.NamespacedName]finding{}
	}
	prev, ok := p.findings[key]
	if ok {
		f = next(&prev, f)
	}
	if ok && prev.same(f) {
		return
	}
	p.findings[key] = f
	p.changed(pod.Namespace)
}

// forget drops the finding about a pod that is gone, finished or no longer
// protected.
func (p *PolicyReports) forget(pod types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.findings[pod]; ok {
		delete(p.findings, pod)
		p.changed(pod.Namespace)
	}
}

// changed enqueues a namespace; p.mu is held.
func (p *PolicyReports) changed(ns string) {
	if p.queue != nil {
		p.queue.Add(namespaceRequest(ns))
		return
	}
	if p.dirty == nil {
		p.dirty = map[string]bool{}
	}
	p.dirty[ns] = true
}

// Reconcile brings the report of the namespace req.Name in step with the
// findings about its pods.
func (p *PolicyReports) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: req.Name}, ns); apierrors.IsNotFound(err) {
		// Its reports go with it.
		p.settled(req.Name)
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading namespace %s: %w", req.Name, err)
	}
	findings, pending, err := p.desired(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	if pending {
		if wait := p.wait(ns.Name); wait > 0 {
			return reconcile.Result{RequeueAfter: min(wait, time.Second)}, nil
		}
	}
	p.settled(ns.Name)
	if err := p.write(ctx, ns.Name, findings); apierrors.IsConflict(err) {
		// Read again, from a cache that has seen the other write.
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// desired returns the findings about the bound pods of a protected
// namespace, and whether some of them have not been evaluated yet.
func (p *PolicyReports) desired(ctx context.Context, ns *corev1.Namespace) ([]podFinding, bool, error) {
	id, err := resolveIdentity(ctx, p.Client, ns)
	if err != nil {
		return nil, false, err
	}
	if !id.protected {
		return nil, false, nil
	}
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods, client.InNamespace(ns.Name)); err != nil {
		return nil, false, fmt.Errorf("listing the pods of namespace %s: %w", ns.Name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []podFinding
	pending := false
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !bound(pod) {
			continue
		}
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		f, ok := p.findings[key]
		if !ok || f.uid != pod.UID {
			pending = true
			continue
		}
		out = append(out, podFinding{pod: key, finding: f})
	}
	return out, pending, nil
}

// wait returns how much longer the namespace's report may wait for
// evaluations; zero when it has waited long enough.
func (p *PolicyReports) wait(ns string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		p.waiting = map[string]time.Time{}
	}
	now := p.now()
	since, ok := p.waiting[ns]
	if !ok {
		p.waiting[ns], since = now, now
	}
	settle := p.Settle
	if settle <= 0 {
		settle = DefaultSettle
	}
	return max(since.Add(settle).Sub(now), 0)
}

func (p *PolicyReports) settled(ns string) {
	p.mu.Lock()
	delete(p.waiting, ns)
	p.mu.Unlock()
}

// write creates, updates or deletes the namespace's report so that it
// holds the findings, and writes nothing when it already does.
func (p *PolicyReports) write(ctx context.Context, ns string, findings []podFinding) error {
	cur := &v1alpha2.PolicyReport{}
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: PolicyReportName}, cur)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading PolicyReport %s/%s: %w", ns, PolicyReportName, err)
	}
	if len(findings) == 0 {
		if !exists {
			return nil
		}
		err := p.Client.Delete(ctx, cur, client.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PolicyReport %s/%s: %w", ns, PolicyReportName, err)
		}
		return nil
	}
	want := cur.DeepCopy()
	want.Results = results(findings, cur.Results, p.now())
	want.Summary = summarize(want.Results)
	if exists && cur.Labels[labelManagedBy] == managedBy && equalReports(cur, want) {
		return nil
	}
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	want.Labels[labelManagedBy] = managedBy
	if !exists {
		want.Namespace, want.Name = ns, PolicyReportName
		if err := p.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("creating PolicyReport %s/%s: %w", ns, PolicyReportName, err)
		}
		return nil
	}
	if err := p.Client.Update(ctx, want); err != nil {
		return fmt.Errorf("updating PolicyReport %s/%s: %w", ns, PolicyReportName, err)
	}
	return nil
}

// equalReports compares what the controller writes of a report.
func equalReports(a, b *v1alpha2.PolicyReport) bool {
	return a.Summary == b.Summary && equality.Semantic.DeepEqual(a.Results, b.Results)
}

func namespaceRequest(ns string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}}
}

func (p *PolicyReports) now() time.Time {
	if p.Clock == nil {
		return time.Now()
	}
	return p.Clock.Now()
}
