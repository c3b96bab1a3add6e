package enforcer

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/dataplane"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// Dataplane is what the enforcer needs of *dataplane.Dataplane.
type Dataplane interface {
	Apply(ep dataplane.Endpoint, ingress, egress rules.RuleSet) error
	Remove(ifindex int) error
	SetFrontends(prefixes []netip.Prefix) error
	Endpoints() ([]int, error)
}

// Pod is a pod running on this node with its own network namespace.
type Pod struct {
	Key      types.NamespacedName
	Endpoint dataplane.Endpoint
}

// Outcome is what Sync did for one pod.
type Outcome struct {
	Pod      types.NamespacedName
	Policies []string // selecting policies, "namespace/name"
	Entries  int      // prefixes installed, both directions
	Changed  bool     // the dataplane was updated
	DenyAll  bool     // the pod denies everything because of Err
	Err      error
}

// Enforcer remembers what it applied, so unchanged pods cost nothing.
// It is not safe for concurrent use.
type Enforcer struct {
	dp      Dataplane
	applied map[int]state
}

type state struct {
	ep       dataplane.Endpoint
	in, eg   rules.RuleSet
	denyAll  bool
	policies []string
}

// New returns an enforcer for dp. After an agent restart nothing is
// remembered, so the first Sync re-applies every pod once; the pinned state
// keeps enforcing meanwhile.
func New(dp Dataplane) *Enforcer {
	return &Enforcer{dp: dp, applied: map[int]state{}}
}

// Sync makes the dataplane enforce compiled for every pod in pods, removes
// managed interfaces that belong to none of them, and sets the frontends.
// A pod the compilation does not know (the snapshot lags behind) keeps its
// current rules.
func (e *Enforcer) Sync(pods []Pod, compiled map[types.NamespacedName]compiler.PodRules, frontends []netip.Prefix) ([]Outcome, error) {
	var errs []error
	if err := e.dp.SetFrontends(frontends); err != nil {
		errs = append(errs, fmt.Errorf("setting frontends: %w", err))
	}
	keep := map[int]bool{}
	var out []Outcome
	for _, p := range pods {
		keep[p.Endpoint.Ifindex] = true
		r, ok := compiled[p.Key]
		if !ok {
			continue
		}
		out = append(out, e.apply(p, r))
	}
	managed, err := e.dp.Endpoints()
	if err != nil {
		errs = append(errs, err)
	}
	for ifindex := range e.applied {
		managed = append(managed, ifindex)
	}
	slices.Sort(managed)
	for _, ifindex := range slices.Compact(managed) {
		if keep[ifindex] {
			continue
		}
		if err := e.dp.Remove(ifindex); err != nil {
			errs = append(errs, fmt.Errorf("removing interface %d: %w", ifindex, err))
			continue
		}
		delete(e.applied, ifindex)
	}
	return out, errors.Join(errs...)
}

func (e *Enforcer) apply(p Pod, r compiler.PodRules) Outcome {
	o := Outcome{Pod: p.Key, Policies: r.Policies, Err: r.Err, DenyAll: r.Err != nil,
		Entries: len(r.Ingress.Entries) + len(r.Egress.Entries)}
	want := state{ep: p.Endpoint, in: r.Ingress, eg: r.Egress, denyAll: o.DenyAll, policies: r.Policies}
	if old, ok := e.applied[p.Endpoint.Ifindex]; ok && old.equal(want) {
		return o
	}
	o.Changed = true
	if err := e.dp.Apply(p.Endpoint, r.Ingress, r.Egress); err != nil {
		o.Err = errors.Join(o.Err, err)
		o.DenyAll = o.DenyAll || errors.Is(err, dataplane.ErrDenyAll)
		// Forget what was applied: the next Sync tries again.
		delete(e.applied, p.Endpoint.Ifindex)
		return o
	}
	e.applied[p.Endpoint.Ifindex] = want
	return o
}

func (s state) equal(o state) bool {
	return s.ep.Ifindex == o.ep.Ifindex && s.ep.AnySource == o.ep.AnySource &&
		slices.Equal(s.ep.Addrs, o.ep.Addrs) && s.in.Equal(o.in) && s.eg.Equal(o.eg) &&
		s.denyAll == o.denyAll
}
