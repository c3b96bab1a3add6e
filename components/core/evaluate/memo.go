package evaluate

import (
	"time"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// memoNodesDefault is how many nodes make it worth remembering messages:
// in a large request most nodes are in one of a few situations, and
// building their messages once each instead of once per node is most of
// what the evaluator would otherwise allocate.
const memoNodesDefault = 64

// memo remembers, for one run of nodes, the messages it has built. Nodes
// in the same situation then share a message, and a refusal for a single
// reason also shares its list of reasons, which no caller modifies; verdict
// makes every list with its capacity equal to its length, so an append
// copies it (TestMemoChangesNoAnswer checks).
type memo struct {
	allows   map[allowKey]string
	sharing  map[sharingKey]sharingAnswer
	verdicts map[verdictKey]wire.Verdict
}

type allowKey struct {
	source v1alpha1.EvidenceSource
	age    time.Duration
}

type sharingKey struct {
	mode    v1alpha1.GPUSharingMode
	devices int
}

type sharingAnswer struct {
	finding
	ok bool
}

// verdictKey is a verdict's only finding and its allow message.
type verdictKey struct {
	finding
	allow string
}

// withMemo returns a copy of in that remembers its messages; a copy per
// run, so that runs on different CPUs share nothing they write.
func (in *input) withMemo() *input {
	run := *in
	run.memo = &memo{}
	return &run
}

// allowMessage explains an allow. Evidence observed the same number of
// seconds ago from the same source reads the same.
func (in *input) allowMessage(s *v1alpha1.NodeSecurityStateSpec) string {
	d := in.now.Sub(s.ObservedAt.Time).Round(time.Second)
	key := allowKey{s.Source, d}
	if m := in.memo; m != nil {
		if msg, ok := m.allows[key]; ok {
			return msg
		}
	}
	msg := "allowed by policy " + in.policyQ + ": " + string(s.Source) + " evidence observed " +
		age(d) + " ago satisfies it"
	if m := in.memo; m != nil {
		if m.allows == nil {
			m.allows = make(map[allowKey]string)
		}
		m.allows[key] = msg
	}
	return msg
}

// sharingFinding is sharingMode, remembered per mode and device count.
func (in *input) sharingFinding(mode v1alpha1.GPUSharingMode, devices int) (finding, bool) {
	m := in.memo
	if m == nil {
		return in.sharingMode(mode, devices)
	}
	key := sharingKey{mode, devices}
	if a, ok := m.sharing[key]; ok {
		return a.finding, a.ok
	}
	f, ok := in.sharingMode(mode, devices)
	if m.sharing == nil {
		m.sharing = make(map[sharingKey]sharingAnswer)
	}
	m.sharing[key] = sharingAnswer{f, ok}
	return f, ok
}

// verdict renders findings, remembering verdicts of a single finding.
func (in *input) verdict(findings []finding, allowMessage string) wire.Verdict {
	m := in.memo
	if m == nil || len(findings) != 1 {
		return verdict(findings, allowMessage)
	}
	key := verdictKey{findings[0], allowMessage}
	if v, ok := m.verdicts[key]; ok {
		return v
	}
	v := verdict(findings, allowMessage)
	if m.verdicts == nil {
		m.verdicts = make(map[verdictKey]wire.Verdict)
	}
	m.verdicts[key] = v
	return v
}
