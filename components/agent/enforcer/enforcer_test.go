package enforcer

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/dataplane"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// fakeDataplane records calls and fails Apply for chosen interfaces.
type fakeDataplane struct {
	calls     []string
	endpoints []int
	failApply map[int]error
}

func (f *fakeDataplane) ApplyAll(changes []dataplane.Change) []error {
	errs := make([]error, len(changes))
	for i, c := range changes {
		f.calls = append(f.calls, fmt.Sprintf("apply %d %s %s", c.Endpoint.Ifindex, c.Ingress, c.Egress))
		if errs[i] = f.failApply[c.Endpoint.Ifindex]; errs[i] != nil {
			continue
		}
		if !slices.Contains(f.endpoints, c.Endpoint.Ifindex) {
			f.endpoints = append(f.endpoints, c.Endpoint.Ifindex)
		}
	}
	return errs
}

func (f *fakeDataplane) RemoveAll(ifindexes []int) error {
	for _, ifindex := range ifindexes {
		f.calls = append(f.calls, fmt.Sprintf("remove %d", ifindex))
		f.endpoints = slices.DeleteFunc(f.endpoints, func(i int) bool { return i == ifindex })
	}
	return nil
}

func (f *fakeDataplane) SetFrontends(p []netip.Prefix) error { return nil }

func (f *fakeDataplane) Endpoints() ([]int, error) { return slices.Clone(f.endpoints), nil }

var (
	podA = Pod{Key: types.NamespacedName{Namespace: "x", Name: "a"},
		Endpoint: dataplane.Endpoint{Ifindex: 10, Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}}
	podB = Pod{Key: types.NamespacedName{Namespace: "x", Name: "b"},
		Endpoint: dataplane.Endpoint{Ifindex: 11, Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}}
	allowWeb = func() rules.RuleSet {
		var b rules.Builder
		b.Add(netip.MustParsePrefix("10.0.0.0/24"), rules.PortSet{Ranges: []rules.PortRange{{Protocol: rules.TCP, First: 80, Last: 80}}})
		return b.Build(true)
	}()
)

func compiled(rs ...compiler.PodRules) map[types.NamespacedName]compiler.PodRules {
	m := map[types.NamespacedName]compiler.PodRules{}
	for _, r := range rs {
		m[r.Pod] = r
	}
	return m
}

func TestSync(t *testing.T) {
	badPolicy := fmt.Errorf("%w x/p: bad", compiler.ErrInvalidPolicy)
	full := fmt.Errorf("%w: map full", dataplane.ErrDenyAll)
	type step struct {
		pods      []Pod
		compiled  map[types.NamespacedName]compiler.PodRules
		held      []Held
		failApply map[int]error
		wantCalls []string
		wantDeny  []string // pods reported deny-all
	}
	tests := []struct {
		name      string
		preloaded []int // endpoints a previous agent left
		steps     []step
	}{
		{name: "apply once, then nothing while unchanged", steps: []step{
			{pods: []Pod{podA, podB}, compiled: compiled(
				compiler.PodRules{Pod: podA.Key, Ingress: allowWeb},
				compiler.PodRules{Pod: podB.Key}),
				wantCalls: []string{"apply 10 isolated[10.0.0.0/24{TCP/80}] allow-all", "apply 11 allow-all allow-all"}},
			{pods: []Pod{podA, podB}, compiled: compiled(
				compiler.PodRules{Pod: podA.Key, Ingress: allowWeb},
				compiler.PodRules{Pod: podB.Key})},
		}},
		{name: "a change applies only the changed pod", steps: []step{
			{pods: []Pod{podA, podB}, compiled: compiled(compiler.PodRules{Pod: podA.Key}, compiler.PodRules{Pod: podB.Key}),
				wantCalls: []string{"apply 10 allow-all allow-all", "apply 11 allow-all allow-all"}},
			{pods: []Pod{podA, podB}, compiled: compiled(compiler.PodRules{Pod: podA.Key}, compiler.PodRules{Pod: podB.Key, Egress: rules.DenyAll}),
				wantCalls: []string{"apply 11 allow-all isolated[]"}},
		}},
		{name: "a pod that left is removed", steps: []step{
			{pods: []Pod{podA, podB}, compiled: compiled(compiler.PodRules{Pod: podA.Key}, compiler.PodRules{Pod: podB.Key}),
				wantCalls: []string{"apply 10 allow-all allow-all", "apply 11 allow-all allow-all"}},
			{pods: []Pod{podA}, compiled: compiled(compiler.PodRules{Pod: podA.Key}),
				wantCalls: []string{"remove 11"}},
		}},
		{name: "endpoints of a previous agent without a pod are removed", preloaded: []int{10, 99}, steps: []step{
			{pods: []Pod{podA}, compiled: compiled(compiler.PodRules{Pod: podA.Key}),
				wantCalls: []string{"apply 10 allow-all allow-all", "remove 99"}},
		}},
		{name: "a pod the snapshot does not know keeps its rules", steps: []step{
			{pods: []Pod{podA}, compiled: compiled(compiler.PodRules{Pod: podA.Key, Ingress: allowWeb}),
				wantCalls: []string{"apply 10 isolated[10.0.0.0/24{TCP/80}] allow-all"}},
			{pods: []Pod{podA}, compiled: compiled()},
		}},
		{name: "a compile error is applied as deny-all and reported", steps: []step{
			{pods: []Pod{podA}, compiled: compiled(compiler.PodRules{Pod: podA.Key, Ingress: rules.DenyAll, Egress: rules.DenyAll, Err: badPolicy}),
				wantCalls: []string{"apply 10 isolated[] isolated[]"}, wantDeny: []string{"x/a"}},
		}},
		{name: "a dataplane fallback is reported and retried", steps: []step{
			{pods: []Pod{podA}, compiled: compiled(compiler.PodRules{Pod: podA.Key, Ingress: allowWeb}), failApply: map[int]error{10: full},
				wantCalls: []string{"apply 10 isolated[10.0.0.0/24{TCP/80}] allow-all"}, wantDeny: []string{"x/a"}},
			{pods: []Pod{podA}, compiled: compiled(compiler.PodRules{Pod: podA.Key, Ingress: allowWeb}),
				wantCalls: []string{"apply 10 isolated[10.0.0.0/24{TCP/80}] allow-all"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dp := &fakeDataplane{endpoints: tc.preloaded}
			e := New(dp)
			for i, s := range tc.steps {
				dp.calls, dp.failApply = nil, s.failApply
				out, err := e.Sync(s.pods, s.compiled, s.held, nil)
				if err != nil {
					t.Fatalf("step %d: Sync: %v", i, err)
				}
				if !slices.Equal(dp.calls, s.wantCalls) {
					t.Fatalf("step %d: calls %q, want %q", i, dp.calls, s.wantCalls)
				}
				var deny []string
				for _, o := range out {
					if o.DenyAll {
						deny = append(deny, o.Pod.String())
						if o.Err == nil {
							t.Fatalf("step %d: %s is deny-all without an error", i, o.Pod)
						}
					}
				}
				if !slices.Equal(deny, s.wantDeny) {
					t.Fatalf("step %d: deny-all pods %v, want %v", i, deny, s.wantDeny)
				}
			}
		})
	}
}

func TestOutcomeWrapsErrors(t *testing.T) {
	dp := &fakeDataplane{failApply: map[int]error{10: fmt.Errorf("%w: map full", dataplane.ErrDenyAll)}}
	out, _ := New(dp).Sync([]Pod{podA}, compiled(compiler.PodRules{Pod: podA.Key, Ingress: allowWeb, Policies: []string{"x/p"}}), nil, nil)
	if len(out) != 1 || !errors.Is(out[0].Err, dataplane.ErrDenyAll) || out[0].Entries != 1 || out[0].Policies[0] != "x/p" {
		t.Fatalf("outcome %+v", out)
	}
}

func TestSyncHeldInterfaces(t *testing.T) {
	held := Held{Endpoint: dataplane.Endpoint{Ifindex: 20, Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.9")}},
		Ingress: allowWeb, Egress: rules.DenyAll}
	dp := &fakeDataplane{}
	e := New(dp)
	step := func(name string, pods []Pod, c map[types.NamespacedName]compiler.PodRules, h []Held, want []string) {
		t.Helper()
		dp.calls = nil
		if _, err := e.Sync(pods, c, h, nil); err != nil {
			t.Fatalf("%s: Sync: %v", name, err)
		}
		if !slices.Equal(dp.calls, want) {
			t.Fatalf("%s: calls %q, want %q", name, dp.calls, want)
		}
	}
	step("a pod", []Pod{podA}, compiled(compiler.PodRules{Pod: podA.Key}), nil,
		[]string{"apply 10 allow-all allow-all"})
	step("an interface is held, first in the batch", []Pod{podA}, compiled(compiler.PodRules{Pod: podA.Key, Ingress: allowWeb}), []Held{held},
		[]string{"apply 20 isolated[10.0.0.0/24{TCP/80}] isolated[]", "apply 10 isolated[10.0.0.0/24{TCP/80}] allow-all"})
	step("still held: nothing to do", []Pod{podA}, compiled(compiler.PodRules{Pod: podA.Key, Ingress: allowWeb}), []Held{held}, nil)
	podC := Pod{Key: types.NamespacedName{Namespace: "x", Name: "c"}, Endpoint: held.Endpoint}
	step("its pod is known: switched to the pod's rules", []Pod{podA, podC},
		compiled(compiler.PodRules{Pod: podA.Key, Ingress: allowWeb}, compiler.PodRules{Pod: podC.Key}), nil,
		[]string{"apply 20 allow-all allow-all"})
	step("held again, then released", []Pod{podA}, compiled(compiler.PodRules{Pod: podA.Key, Ingress: allowWeb}), []Held{held},
		[]string{"apply 20 isolated[10.0.0.0/24{TCP/80}] isolated[]"})
	step("released", []Pod{podA}, compiled(compiler.PodRules{Pod: podA.Key, Ingress: allowWeb}), nil,
		[]string{"remove 20"})
}

func TestSyncSwitchesNewInterfacesFirst(t *testing.T) {
	dp := &fakeDataplane{}
	e := New(dp)
	if _, err := e.Sync([]Pod{podA}, compiled(compiler.PodRules{Pod: podA.Key}), nil, nil); err != nil {
		t.Fatal(err)
	}
	dp.calls = nil
	if _, err := e.Sync([]Pod{podA, podB}, compiled(compiler.PodRules{Pod: podA.Key, Egress: allowWeb}, compiler.PodRules{Pod: podB.Key}), nil, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"apply 11 allow-all allow-all", "apply 10 allow-all isolated[10.0.0.0/24{TCP/80}]"}
	if !slices.Equal(dp.calls, want) {
		t.Errorf("calls %q, want %q: the new pod's interface, passing unjudged traffic, goes first", dp.calls, want)
	}
}

func TestHoldTouchesOnlyUnmanagedInterfaces(t *testing.T) {
	dp := &fakeDataplane{endpoints: []int{10, 99}} // left by a previous agent
	e := New(dp)
	held := func(ifindex int) Held {
		return Held{Endpoint: dataplane.Endpoint{Ifindex: ifindex, Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.9")}}, Ingress: rules.DenyAll, Egress: rules.DenyAll}
	}
	if err := e.Hold([]Held{held(10), held(20)}); err != nil {
		t.Fatal(err)
	}
	want := []string{"apply 20 isolated[] isolated[]"}
	if !slices.Equal(dp.calls, want) {
		t.Errorf("calls %q, want %q: pinned endpoints keep their rules and nothing is removed", dp.calls, want)
	}
}
