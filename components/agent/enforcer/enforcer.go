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
	ApplyAll(changes []dataplane.Change) []error
	RemoveAll(ifindexes []int) error
	SetFrontends(prefixes []netip.Prefix) error
	Endpoints() ([]int, error)
}

// Pod is a pod running on this node with its own network namespace.
type Pod struct {
	Key      types.NamespacedName
	Endpoint dataplane.Endpoint
}

// Held is the host-side interface of a pod the agent cannot name yet (its
// address is not in the API), enforced with the given rules until it can.
type Held struct {
	Endpoint        dataplane.Endpoint
	Ingress, Egress rules.RuleSet
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

// Sync makes the dataplane enforce compiled for every pod in pods and the
// given rules on every held interface, removes managed interfaces that
// belong to neither, and sets the frontends. A pod the compilation does not
// know (the snapshot lags behind) keeps its current rules.
//
// All changes are switched in one batch, interfaces the dataplane does not
// enforce yet first: those are the ones passing traffic no policy judged.
func (e *Enforcer) Sync(pods []Pod, compiled map[types.NamespacedName]compiler.PodRules, held []Held, frontends []netip.Prefix) ([]Outcome, error) {
	var errs []error
	if err := e.dp.SetFrontends(frontends); err != nil {
		errs = append(errs, fmt.Errorf("setting frontends: %w", err))
	}
	keep := map[int]bool{}
	var out []Outcome
	var pending []pendingChange
	for _, p := range pods {
		keep[p.Endpoint.Ifindex] = true
		r, ok := compiled[p.Key]
		if !ok {
			continue
		}
		o := Outcome{Pod: p.Key, Policies: r.Policies, Err: r.Err, DenyAll: r.Err != nil,
			Entries: len(r.Ingress.Entries) + len(r.Egress.Entries)}
		want := state{ep: p.Endpoint, in: r.Ingress, eg: r.Egress, denyAll: o.DenyAll, policies: r.Policies}
		out = append(out, o)
		if e.unchanged(want) {
			continue
		}
		out[len(out)-1].Changed = true
		pending = append(pending, pendingChange{want: want, outcome: len(out) - 1})
	}
	for _, h := range held {
		keep[h.Endpoint.Ifindex] = true
		want := state{ep: h.Endpoint, in: h.Ingress, eg: h.Egress}
		if !e.unchanged(want) {
			pending = append(pending, pendingChange{want: want, outcome: -1})
		}
	}
	for i, err := range e.apply(pending) {
		if err == nil {
			continue
		}
		if n := pending[i].outcome; n >= 0 {
			out[n].Err = errors.Join(out[n].Err, err)
			out[n].DenyAll = out[n].DenyAll || errors.Is(err, dataplane.ErrDenyAll)
			continue
		}
		errs = append(errs, fmt.Errorf("holding interface %d: %w", pending[i].want.ep.Ifindex, err))
	}
	managed, err := e.dp.Endpoints()
	if err != nil {
		errs = append(errs, err)
	}
	for ifindex := range e.applied {
		managed = append(managed, ifindex)
	}
	slices.Sort(managed)
	var gone []int
	for _, ifindex := range slices.Compact(managed) {
		if !keep[ifindex] {
			gone = append(gone, ifindex)
		}
	}
	if len(gone) > 0 {
		if err := e.dp.RemoveAll(gone); err != nil {
			errs = append(errs, fmt.Errorf("removing interfaces %v: %w", gone, err))
		} else {
			for _, ifindex := range gone {
				delete(e.applied, ifindex)
			}
		}
	}
	return out, errors.Join(errs...)
}

// Hold enforces the given rules on every held interface the dataplane does
// not manage yet, and changes nothing else. It serves the time before the
// cluster state is known, when Sync cannot tell which interfaces to keep.
func (e *Enforcer) Hold(held []Held) error {
	managed, err := e.dp.Endpoints()
	if err != nil {
		return err
	}
	var pending []pendingChange
	for _, h := range held {
		if _, ok := e.applied[h.Endpoint.Ifindex]; ok || slices.Contains(managed, h.Endpoint.Ifindex) {
			continue
		}
		pending = append(pending, pendingChange{want: state{ep: h.Endpoint, in: h.Ingress, eg: h.Egress}, outcome: -1})
	}
	var errs []error
	for i, err := range e.apply(pending) {
		if err != nil {
			errs = append(errs, fmt.Errorf("holding interface %d: %w", pending[i].want.ep.Ifindex, err))
		}
	}
	return errors.Join(errs...)
}

// pendingChange is a switch Sync has decided on; outcome is its pod's
// index in Sync's outcomes, -1 for a held interface.
type pendingChange struct {
	want    state
	outcome int
}

func (e *Enforcer) unchanged(want state) bool {
	old, ok := e.applied[want.ep.Ifindex]
	return ok && old.equal(want)
}

// apply switches the pending changes in one batch, interfaces this agent
// has not applied yet first, and returns one error per change (in the
// order given).
func (e *Enforcer) apply(pending []pendingChange) []error {
	errs := make([]error, len(pending))
	if len(pending) == 0 {
		return errs
	}
	order := make([]int, len(pending))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		_, oldA := e.applied[pending[a].want.ep.Ifindex]
		_, oldB := e.applied[pending[b].want.ep.Ifindex]
		switch {
		case !oldA && oldB:
			return -1
		case oldA && !oldB:
			return 1
		}
		return 0
	})
	changes := make([]dataplane.Change, len(order))
	for i, n := range order {
		w := pending[n].want
		changes[i] = dataplane.Change{Endpoint: w.ep, Ingress: w.in, Egress: w.eg}
	}
	for i, err := range e.dp.ApplyAll(changes) {
		n := order[i]
		errs[n] = err
		if err != nil {
			// Forget what was applied: the next Sync tries again.
			delete(e.applied, pending[n].want.ep.Ifindex)
			continue
		}
		e.applied[pending[n].want.ep.Ifindex] = pending[n].want
	}
	return errs
}

func (s state) equal(o state) bool {
	return s.ep.Ifindex == o.ep.Ifindex && s.ep.AnySource == o.ep.AnySource &&
		slices.Equal(s.ep.Addrs, o.ep.Addrs) && s.in.Equal(o.in) && s.eg.Equal(o.eg) &&
		s.denyAll == o.denyAll
}
