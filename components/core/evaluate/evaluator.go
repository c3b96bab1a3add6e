package evaluate

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// DefaultClockSkew is how far in the future a timestamp in the evidence may
// lie before the evaluator distrusts it (CLOCK_SKEW).
const DefaultClockSkew = 30 * time.Second

// Clock tells the time; k8s.io/utils/clock.PassiveClock satisfies it.
type Clock interface {
	Now() time.Time
}

// realClock is the system clock.
type realClock struct{}

// Now returns the system time.
func (realClock) Now() time.Time { return time.Now() }

// Options configure an Evaluator.
type Options struct {
	// Profile is the most permissive profile the evaluator applies; a
	// request may only ask for a stricter one. Defaults to production.
	Profile guard.Profile
	// Clock defaults to the system clock.
	Clock Clock
	// ClockSkew is how far in the future evidence timestamps may lie.
	// Defaults to DefaultClockSkew; negative values are refused.
	ClockSkew time.Duration
}

// Evaluator decides placements. It holds no state between calls and is safe
// for concurrent use.
type Evaluator struct {
	profile guard.Profile
	clock   Clock
	skew    time.Duration
	// memoNodes and parallelNodes are memoNodesDefault and
	// parallelNodesDefault; tests lower or raise them to take each path
	// with few nodes.
	memoNodes, parallelNodes int
}

// New returns an Evaluator, or an error when the options are invalid.
func New(opts Options) (*Evaluator, error) {
	e := &Evaluator{profile: opts.Profile, clock: opts.Clock, skew: opts.ClockSkew,
		memoNodes: memoNodesDefault, parallelNodes: parallelNodesDefault}
	if e.profile == "" {
		e.profile = guard.ProfileProduction
	}
	if !e.profile.IsValid() {
		return nil, fmt.Errorf("unknown profile %q: want %q or %q", opts.Profile, guard.ProfileProduction, guard.ProfileLab)
	}
	if e.clock == nil {
		e.clock = realClock{}
	}
	if e.skew < 0 {
		return nil, fmt.Errorf("clock skew %s must not be negative", e.skew)
	}
	if e.skew == 0 {
		e.skew = DefaultClockSkew
	}
	return e, nil
}

// Profile returns the most permissive profile the evaluator applies.
func (e *Evaluator) Profile() guard.Profile { return e.profile }

// Evaluate decides the request. The request should have passed
// wire.EvaluateRequest.Validate; if it has not, Evaluate still never
// panics and never allows on facts it cannot interpret.
func (e *Evaluator) Evaluate(req *wire.EvaluateRequest) *wire.EvaluateResponse {
	now := e.clock.Now()
	profile := e.profile
	switch req.Profile {
	case "", guard.ProfileLab:
		// The evaluator's own profile, which is never laxer than lab.
	default:
		// production, or a value Validate refuses: be strict.
		profile = guard.ProfileProduction
	}
	in := newInput(req, profile, now, e.skew)
	resp := &wire.EvaluateResponse{
		Profile:     profile,
		EvaluatedAt: metav1.NewTime(now),
		Pod:         in.podVerdict(),
		Results:     make([]wire.NodeResult, len(req.Nodes)),
	}
	in.nodes(req.Nodes, resp.Results, &resp.Pod, e.memoNodes, e.parallelNodes)
	return resp
}

// parallelNodesDefault is how many nodes make it worth evaluating a
// request on more than one CPU: below it, starting goroutines costs more
// than it saves.
const parallelNodesDefault = 1024

// nodes decides every node into results. Nodes are independent and the
// input is read-only, so a request of parallelNodes or more is cut into
// one run of nodes per CPU, and one of memoNodes or more remembers its
// messages; the answer is the same as one decided in order.
func (in *input) nodes(nodes []wire.Node, results []wire.NodeResult, pod *wire.Verdict, memoNodes, parallelNodes int) {
	if len(nodes) >= memoNodes {
		in = in.withMemo()
	}
	runs := min(runtime.GOMAXPROCS(0), len(nodes)/parallelNodes)
	if runs < 2 {
		for i := range nodes {
			results[i] = in.node(&nodes[i], pod)
		}
		return
	}
	var wg sync.WaitGroup
	size := (len(nodes) + runs - 1) / runs
	for lo := size; lo < len(nodes); lo += size {
		hi := min(lo+size, len(nodes))
		run := in.withMemo()
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				results[i] = run.node(&nodes[i], pod)
			}
		})
	}
	for i := range size {
		results[i] = in.node(&nodes[i], pod)
	}
	wg.Wait()
}
