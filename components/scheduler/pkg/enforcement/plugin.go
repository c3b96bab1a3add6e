package enforcement

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/clock"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/guardclient"
	"github.com/xila-guard/xila-guard/components/api/version"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = guard.PluginName

// namespaceSignerName keys the pod's namespace in batching signatures: the
// namespace decides the tenant, and so every answer of this plugin.
const namespaceSignerName = "v1.Pod.Namespace"

// maxConcurrentConfirms bounds the Bind re-judgements in flight. The
// scheduler binds in a goroutine per pod; under a burst, thousands of them
// would each send their API reads at once, and thrash. Waiting here
// instead keeps the API server's load even, and lets the waiting Binds
// share the reads of the ones ahead of them.
const maxConcurrentConfirms = 64

// freshReadsPerBind is how many API reads Bind makes for one pod. The
// plugin's own client gets that multiple of the scheduler's rate limit, so
// that the re-reads never throttle binding.
const freshReadsPerBind = 2

// Enforcement is the XilaGuardEnforcement plugin. It admits a protected
// pod onto a node only on an explicit allow from the evaluator, which it
// links in, keeps every other pod off the pool nodes, and stands in for
// the TaintToleration filter so that tenants need no toleration for their
// own pool.
type Enforcement struct {
	handle   fwk.Handle
	settings settings
	eval     evaluator
	answers  *answers
	caches   *caches
	guard    *sharedReads
	activate *activator
	// confirms holds a slot for each Bind re-judgement in flight.
	confirms chan struct{}
	// challenger re-attests a node at Bind; nil without an
	// attestationURL.
	challenger challenger
	// taintComparisonOperators follows the feature gate of the same name,
	// as the TaintToleration plugin does.
	taintComparisonOperators bool
}

var (
	_ fwk.PreFilterPlugin   = &Enforcement{}
	_ fwk.FilterPlugin      = &Enforcement{}
	_ fwk.ReservePlugin     = &Enforcement{}
	_ fwk.BindPlugin        = &Enforcement{}
	_ fwk.PostFilterPlugin  = &Enforcement{}
	_ fwk.EnqueueExtensions = &Enforcement{}
	_ fwk.SignPlugin        = &Enforcement{}
)

// Name returns the plugin's name.
func (pl *Enforcement) Name() string { return Name }

// SignPod lets the scheduler batch pods that would get the same answers:
// the plugin's depend on the namespace and the tolerations only. Batching
// never skips PreFilter, and the node it hints at still passes Filter.
func (pl *Enforcement) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{
		{Key: fwk.TolerationsSignerName, Value: fwk.TolerationsSigner(pod)},
		{Key: namespaceSignerName, Value: pod.Namespace},
	}, nil
}

// PreFilter resolves the pod's tenant and policy, snapshots the evidence of
// the tenant's pool nodes from the caches, and has the evaluator judge all
// of them — plus one node in no pool, whose answer holds for every such
// node — in a single evaluation, unless it judged an identical snapshot
// within the answer reuse window. Filter then only looks answers up. A pod
// the evaluator refuses outright, or whose answer does not match the
// snapshot, is refused on every node here.
func (pl *Enforcement) PreFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !pl.caches.hasSynced() {
		return nil, fwk.NewStatus(fwk.Error, "waiting for the caches of namespaces and guard.xila.us objects to sync")
	}
	id, err := pl.caches.resolve(pod.Namespace)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	st := &cycleState{id: id}
	cs.Write(stateKey, st)
	if !id.protected {
		return nil, nil
	}
	candidates, unpooled, key := pl.snapshot(&id, nodes)
	ev, err := pl.ask(ctx, pod, &id, candidates, key)
	if err != nil {
		countRefusal(pointPreFilter, []guard.Reason{guard.ReasonEvaluatorError})
		return nil, mismatchStatus(err)
	}
	if ev.Pod.Decision != guard.DecisionAllow {
		countRefusal(pointPreFilter, ev.Pod.Reasons)
		return nil, podStatus(ev.Pod, id.note)
	}
	st.judged = make(map[string]*judgement, len(candidates))
	for i, r := range ev.Results {
		j := newJudgement(candidates[i].UID, r)
		j.rechallenge = pl.challenger != nil && r.Decision != guard.DecisionAllow && freshAttestationHelps(candidates[i].State, r.Reasons)
		if i == unpooled {
			st.unpooled = j
		} else {
			st.judged[r.Node] = j
		}
	}
	return narrow(st), nil
}

// PreFilterExtensions returns nil: answers do not depend on other pods.
func (pl *Enforcement) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter applies the condition table to the node: other pools are closed,
// the tenant's pool and unpooled nodes pass only on the evaluator's allow,
// and unprotected pods stay off every pool node. The taints are checked
// last, with the pool taint tolerated for the pool's own tenant.
func (pl *Enforcement) Filter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	st, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := ni.Node()
	pool := node.Labels[pl.settings.poolLabel]
	switch {
	case !st.id.protected && pool != "":
		return tenantMismatch(pool, &st.id)
	case st.id.protected:
		if status := lookup(st, node, pool); status != nil {
			return status
		}
	}
	return pl.taintStatus(klog.FromContext(ctx), pod, node, st.id.pool())
}

// Reserve remembers the UID of the chosen node, for Bind to compare.
func (pl *Enforcement) Reserve(_ context.Context, cs fwk.CycleState, _ *corev1.Pod, nodeName string) *fwk.Status {
	st, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if !st.id.protected {
		return nil
	}
	ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("reading node %s from the snapshot: %w", nodeName, err))
	}
	st.chosenUID = ni.Node().UID
	return nil
}

// Unreserve has nothing to undo: Reserve only took a note for Bind.
func (pl *Enforcement) Unreserve(context.Context, fwk.CycleState, *corev1.Pod, string) {}

// New builds the plugin, and the evaluator of its profile, from its Args
// and the environment variables of the architecture, which take
// precedence.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	var args Args
	if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
		return nil, fmt.Errorf("invalid %sArgs: %w", Name, err)
	}
	s, err := resolveSettings(args, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("invalid %sArgs: %w", Name, err)
	}
	ev, err := newEvaluator(s)
	if err != nil {
		return nil, fmt.Errorf("invalid %sArgs: %w", Name, err)
	}
	cfg := rest.CopyConfig(h.KubeConfig())
	if cfg.QPS > 0 {
		cfg.QPS *= freshReadsPerBind
		cfg.Burst *= freshReadsPerBind
	}
	gc, err := guardclient.New(cfg)
	if err != nil {
		return nil, err
	}
	c, infs, err := startCaches(ctx, h, gc, s.poolLabel)
	if err != nil {
		return nil, err
	}
	pl := newEnforcement(ctx, h, s, ev, c, gc)
	if s.attestationURL != "" {
		pl.challenger = newHTTPChallenger(s.attestationURL, s.challengeTimeout)
	}
	if err := watch(ctx, h, infs, pl.activate); err != nil {
		return nil, err
	}
	if !waitForSync(ctx, infs) {
		klog.FromContext(ctx).Info("The guard caches have not synced; protected pods wait until they do", "waited", initialSyncWait.String())
	}
	klog.FromContext(ctx).Info("Xila Guard enforcement enabled", "version", version.Get(), "profile", h.ProfileName(),
		"evaluatorProfile", s.profile, "answerReuse", s.answerReuse, "poolLabel", s.poolLabel, "attestationURL", s.attestationURL)
	return pl, nil
}

// newEnforcement assembles the plugin from its parts; tests call it with
// fakes.
func newEnforcement(ctx context.Context, h fwk.Handle, s settings, ev evaluator, c *caches, gr guardReader) *Enforcement {
	registerMetrics()
	return &Enforcement{
		handle:                   h,
		settings:                 s,
		eval:                     ev,
		answers:                  &answers{window: s.answerReuse, clock: clock.RealClock{}},
		caches:                   c,
		guard:                    newSharedReads(gr, time.Now),
		activate:                 newActivator(ctx, h, c, h.ProfileName()),
		confirms:                 make(chan struct{}, maxConcurrentConfirms),
		taintComparisonOperators: utilfeature.DefaultFeatureGate.Enabled(features.TaintTolerationComparisonOperators),
	}
}
