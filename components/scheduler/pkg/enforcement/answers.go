package enforcement

import (
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/xila-guard/xila-guard/components/core/wire"
)

// maxAnswers bounds the answers kept; one per tenant in a burst is typical.
const maxAnswers = 128

// answers remembers the evaluator's answers about snapshots for a short
// while, so that a burst of a tenant's pods is judged once. The evaluator is a pure function of its input and the time, so an
// identical snapshot gets the same answer; only time-based findings can
// differ, by at most the reuse window, and Bind judges the chosen node
// on fresh facts before any bind.
type answers struct {
	window time.Duration
	clock  clock.PassiveClock

	mu   sync.Mutex
	byID map[string]answer
}

type answer struct {
	at time.Time
	ev *wire.EvaluateResponse
}

// get returns the answer about the snapshot, if one is recent enough.
func (a *answers) get(key string) (*wire.EvaluateResponse, bool) {
	if a.window <= 0 {
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byID[key]
	if !ok || a.clock.Since(e.at) >= a.window {
		return nil, false
	}
	return e.ev, true
}

// put remembers an answer, forgetting expired ones when full.
func (a *answers) put(key string, ev *wire.EvaluateResponse, at time.Time) {
	if a.window <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byID == nil || len(a.byID) >= maxAnswers {
		now := a.clock.Now()
		kept := make(map[string]answer, maxAnswers)
		for k, e := range a.byID {
			if now.Sub(e.at) < a.window && len(kept) < maxAnswers/2 {
				kept[k] = e
			}
		}
		a.byID = kept
	}
	a.byID[key] = answer{at: at, ev: ev}
}

// snapshotKey identifies what an answer depends on: the profile, the
// tenant, the policy's version, and each node's name, UID, allocatable
// GPUs and evidence version, in order.
type snapshotKey struct{ strings.Builder }

func (k *snapshotKey) add(parts ...string) {
	for _, p := range parts {
		k.WriteString(p)
		k.WriteByte(0)
	}
}
