package enforcement

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// stateKey is where PreFilter leaves its snapshot in the CycleState.
const stateKey fwk.StateKey = Name

// judgement is the evaluator's answer about one node, with what it judged.
type judgement struct {
	uid         types.UID
	decision    guard.Decision
	reasons     []guard.Reason
	message     string
	incarnation string
	// rechallenge: the node is refused only because its attested evidence
	// is too old or has no verdict, and an attestation controller can
	// attest it anew: Filter lets it through and Bind re-challenges
	// it, refusing the bind unless the fresh evidence allows it.
	rechallenge bool
}

func newJudgement(uid types.UID, r wire.NodeResult) *judgement {
	return &judgement{uid: uid, decision: r.Decision, reasons: r.Reasons, message: r.Message, incarnation: r.Incarnation}
}

// cycleState is one scheduling cycle's snapshot: written by PreFilter, read
// by Filter, Reserve and Bind.
type cycleState struct {
	id identity
	// judged holds the tenant's pool nodes by name.
	judged map[string]*judgement
	// unpooled is the answer for every node in no pool; nil when no such
	// node existed at PreFilter.
	unpooled *judgement
	// chosenUID is the UID of the node Reserve saw the pod go to.
	chosenUID types.UID
}

// Clone shares the snapshot: it is not changed after PreFilter, except by
// Reserve, which runs on the cycle's own state after every clone is gone.
func (s *cycleState) Clone() fwk.StateData { return s }

func readState(cs fwk.CycleState) (*cycleState, error) {
	data, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %s's cycle state: %w", Name, err)
	}
	s, ok := data.(*cycleState)
	if !ok {
		return nil, fmt.Errorf("%s's cycle state has type %T", Name, data)
	}
	return s, nil
}
