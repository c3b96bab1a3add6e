package client

import (
	"strings"
	"sync"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// detach points every string of resp, which was decoded from an answer
// without copies, at memory the answer does not own, so that the buffer
// the answer was read into can serve the next call:
//   - a node's name and incarnation at the same place in the request share
//     the request's strings, which is what an evaluator sends back;
//   - profiles, decisions and known reasons are the package constants;
//   - messages, which repeat across nodes, are copied once per call and
//     shared by every result that carries the same text;
//   - anything else is copied.
func detach(req *wire.EvaluateRequest, resp *wire.EvaluateResponse) {
	m := messages.Get().(map[string]string)
	defer func() {
		clear(m)
		messages.Put(m)
	}()
	resp.Profile = guard.Profile(constant(string(resp.Profile), string(guard.ProfileProduction), string(guard.ProfileLab)))
	detachVerdict(&resp.Pod.Decision, resp.Pod.Reasons, &resp.Pod.Message, m)
	for i := range resp.Results {
		r := &resp.Results[i]
		var n *wire.Node
		if i < len(req.Nodes) {
			n = &req.Nodes[i]
		}
		switch {
		case n != nil && r.Node == n.Name:
			r.Node = n.Name
		default:
			r.Node = strings.Clone(r.Node)
		}
		switch {
		case r.Incarnation == "":
			r.Incarnation = ""
		case n != nil && n.State != nil && r.Incarnation == n.State.Incarnation:
			r.Incarnation = n.State.Incarnation
		default:
			r.Incarnation = strings.Clone(r.Incarnation)
		}
		detachVerdict(&r.Decision, r.Reasons, &r.Message, m)
	}
}

// messages are the sets of messages detach shares within one answer.
var messages = sync.Pool{New: func() any { return make(map[string]string) }}

func detachVerdict(decision *guard.Decision, reasons []guard.Reason, message *string, seen map[string]string) {
	*decision = guard.Decision(constant(string(*decision),
		string(guard.DecisionAllow), string(guard.DecisionDeny), string(guard.DecisionIndeterminate)))
	for i, r := range reasons {
		reasons[i] = knownReason(r)
	}
	if *message == "" {
		*message = ""
		return
	}
	if s, ok := seen[*message]; ok {
		*message = s
		return
	}
	s := strings.Clone(*message)
	seen[s] = s
	*message = s
}

// constant returns the one of known that equals s, or a copy of s.
func constant(s string, known ...string) string {
	for _, k := range known {
		if s == k {
			return k
		}
	}
	return strings.Clone(s)
}

// knownReason returns the constant that equals r, or a copy of r, which a
// newer evaluator may send.
func knownReason(r guard.Reason) guard.Reason {
	for _, k := range guard.Reasons {
		if r == k {
			return k
		}
	}
	return guard.Reason(strings.Clone(string(r)))
}
