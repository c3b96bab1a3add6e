package plugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Explanation is why a pod is where it is, or is nowhere: the evaluator's
// judgement of every candidate node, as the scheduler and the webhook
// would reach it now.
type Explanation struct {
	Namespace, Name string
	// Phase is the pod's phase; Node the node it is bound to, if any.
	Phase corev1.PodPhase
	Node  string
	// Protected is false for a pod of no tenant: Xila Guard does not judge
	// it, and nothing below is set.
	Protected bool
	Tenant    string
	Policy    string
	// Note says why the tenant or the policy is missing.
	Note    string
	Profile guard.Profile
	// Pod is the verdict about the pod as a whole: a refusal here (no
	// tenant, no policy) refuses it everywhere.
	Pod wire.Verdict
	// Nodes are the candidate nodes, allowed first: every node for a pod
	// not bound yet, its own node for a bound one.
	Nodes []NodeExplanation
	// Devices are the DRA devices the pod's claims hold, each judged as
	// the webhook judges their allocation; none for a pod without
	// allocated claims.
	Devices []DeviceExplanation
	// DeviceNote says why the devices could not be judged.
	DeviceNote string
	// Events are the pod's latest scheduling and Xila Guard events.
	Events []string
}

// DeviceExplanation is the judgement of one device a claim of the pod holds.
type DeviceExplanation struct {
	Claim string
	// Device is <driver>/<pool>/<device>.
	Device   string
	Node     string
	Decision guard.Decision
	Reasons  []guard.Reason
	Fact     string
}

// NodeExplanation is one node's judgement.
type NodeExplanation struct {
	Node     string
	Pool     string
	Decision guard.Decision
	Reasons  []guard.Reason
	// Fact is the evaluator's explanation: what it found on the node.
	Fact string
	// Fix says what would change the decision.
	Fix string
}

// Bound reports whether the pod is on a node.
func (e *Explanation) Bound() bool { return e.Node != "" }

// Allowed reports whether the evaluator allows the pod on at least one
// candidate node (for a bound pod: on its own).
func (e *Explanation) Allowed() bool {
	return slices.ContainsFunc(e.Nodes, func(n NodeExplanation) bool { return n.Decision == guard.DecisionAllow })
}

// maxEvents is how many of the pod's events an explanation shows.
const maxEvents = 3

// Explain judges the pod against the cluster's current objects with the
// evaluator library, the one the scheduler and the webhook link.
func Explain(ctx context.Context, r client.Reader, profile guard.Profile, clock evaluate.Clock, namespace, name string) (*Explanation, error) {
	pod := &corev1.Pod{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pod %s/%s not found", namespace, name)
		}
		return nil, fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
	}
	out := &Explanation{Namespace: namespace, Name: name, Phase: pod.Status.Phase, Node: pod.Spec.NodeName, Profile: profile}
	l, err := resolve.ListBindings(ctx, r)
	if err != nil {
		return nil, err
	}
	ns, _, err := l.Namespace(namespace)
	if err != nil {
		return nil, err
	}
	id, err := resolve.Namespace(ns, l)
	if err != nil {
		return nil, err
	}
	out.Protected, out.Note = id.Protected, id.Note
	out.Events = podEvents(ctx, r, pod)
	if !id.Protected {
		return out, nil
	}
	if id.Tenant != nil {
		out.Tenant = id.Tenant.ID
	}
	if id.Policy != nil {
		out.Policy = id.Policy.Name
	}
	nodes, err := candidates(ctx, r, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	eval, err := evaluate.New(evaluate.Options{Profile: profile, Clock: clock})
	if err != nil {
		return nil, err
	}
	res := eval.Evaluate(&wire.EvaluateRequest{Profile: profile,
		Pod:    wire.Pod{Namespace: namespace, Name: name, UID: pod.UID},
		Tenant: wire.TenantOf(id.Tenant), Policy: wire.PolicyOf(id.Policy), Nodes: nodes, DevicesByClaim: devices.ByClaim(pod)})
	out.Pod = res.Pod
	pools := map[string]string{}
	for _, n := range nodes {
		pools[n.Name] = n.Pool
	}
	for _, nr := range res.Results {
		out.Nodes = append(out.Nodes, NodeExplanation{Node: nr.Node, Pool: pools[nr.Node], Decision: nr.Decision,
			Reasons: nr.Reasons, Fact: nr.Message, Fix: Fix(nr.Reasons, out.Policy, pools[nr.Node])})
	}
	slices.SortFunc(out.Nodes, func(a, b NodeExplanation) int {
		return cmp.Or(cmp.Compare(rank(a.Decision), rank(b.Decision)), cmp.Compare(a.Node, b.Node))
	})
	if id.Tenant != nil && id.Policy != nil && len(pod.Spec.ResourceClaims) > 0 {
		if err := explainDevices(ctx, r, eval, profile, pod, devices.Claim{Namespace: namespace, Tenant: wire.TenantOf(id.Tenant), Policy: wire.PolicyOf(id.Policy)}, out); err != nil {
			out.DeviceNote = err.Error()
		}
	}
	return out, nil
}

// explainDevices judges every device the pod's allocated claims hold, with
// the judgement the webhook gives their allocation (devices.Judge).
func explainDevices(ctx context.Context, r client.Reader, eval devices.Evaluator, profile guard.Profile, pod *corev1.Pod, c devices.Claim, out *Explanation) error {
	names, err := devices.PodClaims(pod)
	if err != nil {
		return err
	}
	var sl resourcev1.ResourceSliceList
	if err := r.List(ctx, &sl); err != nil {
		return fmt.Errorf("listing ResourceSlices: %w", err)
	}
	pools := map[string][]*resourcev1.ResourceSlice{}
	for i := range sl.Items {
		s := &sl.Items[i]
		k := devices.PoolKey(s.Spec.Driver, s.Spec.Pool.Name)
		pools[k] = append(pools[k], s)
	}
	for _, name := range names {
		claim := &resourcev1.ResourceClaim{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, claim); err != nil {
			return fmt.Errorf("reading claim %s: %w", name, err)
		}
		a := claim.Status.Allocation
		if a == nil {
			continue
		}
		configs := devices.AllocationConfigs(a)
		for i := range a.Devices.Results {
			res := &a.Devices.Results[i]
			key := devices.KeyOf(res)
			d := DeviceExplanation{Claim: name, Device: key.String()}
			slice, dev := devices.Find(pools[devices.PoolKey(key.Driver, key.Pool)], key)
			var node *corev1.Node
			if dev != nil {
				d.Node = devices.NodeOf(slice, dev)
				node = &corev1.Node{}
				if err := r.Get(ctx, client.ObjectKey{Name: d.Node}, node); err != nil {
					node = nil
				}
			}
			if node == nil {
				d.Decision, d.Reasons = guard.DecisionIndeterminate, []guard.Reason{guard.ReasonDeviceUnknown}
				d.Fact = "no ResourceSlice publishes the device on a known node"
				out.Devices = append(out.Devices, d)
				continue
			}
			var state *v1alpha1.NodeSecurityStateSpec
			nss := &v1alpha1.NodeSecurityState{}
			if err := r.Get(ctx, client.ObjectKey{Name: d.Node}, nss); err == nil {
				state = &nss.Spec
			}
			c.Name = name
			fs := devices.Judge(eval, profile, guard.LabelTenantPool, c, devices.Allocated{Result: res, Configs: configs, Device: dev, Node: node, State: state})
			d.Decision = guard.DecisionAllow
			if len(fs) > 0 {
				d.Decision = guard.DecisionDeny
				facts := make([]string, len(fs))
				for j, f := range fs {
					d.Reasons = append(d.Reasons, f.Reason)
					facts[j] = f.Detail
				}
				d.Fact = strings.Join(facts, "; ")
			}
			out.Devices = append(out.Devices, d)
		}
	}
	return nil
}

// rank orders decisions for reading: allowed nodes first.
func rank(d guard.Decision) int {
	switch d {
	case guard.DecisionAllow:
		return 0
	case guard.DecisionDeny:
		return 1
	}
	return 2
}

// candidates are the nodes to judge, with their evidence: the bound node,
// or every node.
func candidates(ctx context.Context, r client.Reader, bound string) ([]wire.Node, error) {
	var nodes []corev1.Node
	if bound != "" {
		n := &corev1.Node{}
		if err := r.Get(ctx, client.ObjectKey{Name: bound}, n); apierrors.IsNotFound(err) {
			// The evaluator says what a missing node means.
			return []wire.Node{{Name: bound}}, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", bound, err)
		}
		nodes = []corev1.Node{*n}
	} else {
		var list corev1.NodeList
		if err := r.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		nodes = list.Items
	}
	var states v1alpha1.NodeSecurityStateList
	if err := r.List(ctx, &states); err != nil {
		return nil, fmt.Errorf("listing NodeSecurityStates: %w", err)
	}
	byName := make(map[string]*v1alpha1.NodeSecurityState, len(states.Items))
	for i := range states.Items {
		byName[states.Items[i].Name] = &states.Items[i]
	}
	out := make([]wire.Node, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		c := wire.NodeOf(n, n.Labels[guard.LabelTenantPool])
		if s := byName[n.Name]; s != nil {
			c.State = &s.Spec
		}
		out = append(out, c)
	}
	return out, nil
}

// podEvents returns the pod's latest FailedScheduling and Xila Guard
// events, newest first; none when they cannot be read.
func podEvents(ctx context.Context, r client.Reader, pod *corev1.Pod) []string {
	var list eventsv1.EventList
	if err := r.List(ctx, &list, client.InNamespace(pod.Namespace)); err != nil {
		return nil
	}
	type ev struct {
		at   time.Time
		text string
	}
	var evs []ev
	for _, e := range list.Items {
		if e.Regarding.Kind != "Pod" || e.Regarding.Name != pod.Name || (pod.UID != "" && e.Regarding.UID != "" && e.Regarding.UID != pod.UID) {
			continue
		}
		if e.Reason != "FailedScheduling" && !strings.HasPrefix(e.Reason, "Guard") {
			continue
		}
		evs = append(evs, ev{lastSeen(&e), e.Reason + ": " + e.Note})
	}
	slices.SortFunc(evs, func(a, b ev) int { return b.at.Compare(a.at) })
	out := make([]string, 0, min(len(evs), maxEvents))
	for _, e := range evs[:min(len(evs), maxEvents)] {
		out = append(out, e.text)
	}
	return out
}

// lastSeen is when an event was last observed.
func lastSeen(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.DeprecatedLastTimestamp.Time
}
