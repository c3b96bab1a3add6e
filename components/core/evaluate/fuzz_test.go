package evaluate

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// FuzzEvaluate builds requests, valid or not, from the fuzzer's bytes and
// checks that the evaluator never panics and never allows what it must not.
func FuzzEvaluate(f *testing.F) {
	f.Add(false, []byte{})
	f.Add(true, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add(true, []byte("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"))
	f.Fuzz(func(t *testing.T, lab bool, choices []byte) {
		profile := guard.ProfileProduction
		if lab {
			profile = guard.ProfileLab
		}
		req := generate(&chooser{data: choices})
		e := newEvaluator(profile)
		resp := e.Evaluate(req)
		checkFailClosed(t, profile, req, resp)
		checkLargeMatchesAlone(t, e, req)
	})
}

// checkLargeMatchesAlone decides the request's nodes three times over in
// one request, with messages remembered and runs on several CPUs from
// the first node on, and each node in a request of its own, where neither
// happens: every node must get the same answer both ways.
func checkLargeMatchesAlone(t *testing.T, e *Evaluator, req *wire.EvaluateRequest) {
	t.Helper()
	large := *req
	large.Nodes = nil
	for round := range 3 {
		for _, n := range req.Nodes {
			n.Name = fmt.Sprintf("%s-%d", n.Name, round)
			if n.State != nil && round > 0 {
				// The copies differ from the original in facts that
				// messages quote: the number of devices, and the age of
				// the evidence.
				s := *n.State
				if round == 1 {
					s.Devices = append(slices.Clone(s.Devices), s.Devices...)
				} else {
					s.ObservedAt = metav1.NewTime(s.ObservedAt.Add(-time.Second))
				}
				n.State = &s
			}
			large.Nodes = append(large.Nodes, n)
		}
	}
	checkEachAlone(t, e, &large, tuned(e, 1, 1).Evaluate(&large))
}

// checkEachAlone decides every node of req in a request of its own, with
// nothing remembered and on one CPU, and fails unless each answer is the
// node's result in whole, the answer to req. It returns the answers alone.
func checkEachAlone(t *testing.T, e *Evaluator, req *wire.EvaluateRequest, whole *wire.EvaluateResponse) []wire.NodeResult {
	t.Helper()
	e = tuned(e, math.MaxInt, math.MaxInt)
	out := make([]wire.NodeResult, len(req.Nodes))
	for i := range req.Nodes {
		alone := *req
		alone.Nodes = req.Nodes[i : i+1]
		out[i] = e.Evaluate(&alone).Results[0]
		if diff := cmp.Diff(out[i], whole.Results[i]); diff != "" {
			t.Fatalf("node %d decided differently in a large request (-alone +large):\n%s", i, diff)
		}
	}
	return out
}

// FuzzDecodeAndEvaluate feeds raw bodies through the server's decoder and
// the evaluator, as a request from the network would travel.
func FuzzDecodeAndEvaluate(f *testing.F) {
	for _, seed := range [][]byte{{}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte("seed-with-more-choices-in-it")} {
		body, err := json.Marshal(generate(&chooser{data: seed}))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(true, body)
	}
	f.Fuzz(func(t *testing.T, lab bool, body []byte) {
		req, err := wire.DecodeEvaluateRequest(body, wire.Limits{MaxNodes: 64})
		if err != nil {
			return
		}
		profile := guard.ProfileProduction
		if lab {
			profile = guard.ProfileLab
		}
		e := newEvaluator(profile)
		checkFailClosed(t, profile, req, e.Evaluate(req))
		checkLargeMatchesAlone(t, e, req)
	})
}

// checkFailClosed is an oracle written apart from the rules: for every
// allowed node it re-checks, directly against the request, each fact an
// allow depends on.
func checkFailClosed(t *testing.T, server guard.Profile, req *wire.EvaluateRequest, resp *wire.EvaluateResponse) {
	t.Helper()
	if len(resp.Results) != len(req.Nodes) {
		t.Fatalf("%d results for %d nodes", len(resp.Results), len(req.Nodes))
	}
	profile := guard.ProfileProduction
	if server == guard.ProfileLab && (req.Profile == "" || req.Profile == guard.ProfileLab) {
		profile = guard.ProfileLab
	}
	if resp.Profile != profile {
		t.Fatalf("applied profile %q, want %q", resp.Profile, profile)
	}
	for i, r := range resp.Results {
		n := &req.Nodes[i]
		if r.Node != n.Name || !r.Decision.IsValid() || r.Message == "" {
			t.Fatalf("result %d is %+v for node %q", i, r, n.Name)
		}
		for _, reason := range r.Reasons {
			if !reason.IsKnown() {
				t.Fatalf("node %q: unknown reason %q", n.Name, reason)
			}
		}
		if r.Decision != guard.DecisionAllow {
			continue
		}
		if why := allowForbidden(profile, req, n, resp.EvaluatedAt.Time); why != "" {
			t.Fatalf("node %q allowed although %s: %+v\nrequest: %s", n.Name, why, r, mustJSON(req))
		}
	}
}

// allowForbidden returns why the node must not be allowed, or "".
func allowForbidden(profile guard.Profile, req *wire.EvaluateRequest, n *wire.Node, at time.Time) string {
	switch {
	case req.Tenant == nil || req.Tenant.ID == "":
		return "the tenant is unresolved"
	case req.Policy == nil:
		return "there is no policy"
	}
	spec := &req.Policy.Spec
	pool := req.Tenant.Pool
	if pool == "" {
		pool = req.Tenant.ID
	}
	if n.Pool == "" {
		if spec.Confinement != v1alpha1.ConfinementAny {
			return "the node is outside the pool under confinement " + string(spec.Confinement)
		}
		return ""
	}
	if n.Pool != pool {
		return "the node is in another pool"
	}
	s := n.State
	switch {
	case s == nil:
		return "the evidence is missing"
	case !s.Complete:
		return "the evidence is incomplete"
	case s.Source == v1alpha1.SourceMock && profile != guard.ProfileLab:
		return "mock evidence under production"
	case s.Source != v1alpha1.SourceMock && !slices.Contains(spec.Evidence.AcceptedSources, s.Source):
		return "the source is not accepted"
	case n.UID != "" && n.UID != s.NodeUID:
		return "the evidence names another node"
	case s.ObservedAt.IsZero():
		return "the evidence has no time"
	}
	maxAge := v1alpha1.DefaultMaxEvidenceAge
	if spec.Evidence.MaxAge != nil {
		maxAge = spec.Evidence.MaxAge.Duration
	}
	if age := at.Sub(s.ObservedAt.Time); age > maxAge || -age > DefaultClockSkew {
		return "the evidence is stale or from the future"
	}
	if why := gpusUnaccounted(spec, n.AllocatableGPUs, n.AllocatableSharedGPUs, s.Devices); why != "" {
		return why
	}
	return contentForbidden(spec, s, at)
}

// gpusUnaccounted returns why the devices do not account for the GPUs the
// node offers, or for the policy's GPU rules, or "".
func gpusUnaccounted(spec *v1alpha1.PlacementPolicySpec, allocatable, shared *int64, devices []v1alpha1.GPUDevice) string {
	var offered int64
	if allocatable != nil {
		offered = *allocatable
	}
	if shared != nil && *shared > 0 && len(devices) > 0 && !slices.ContainsFunc(devices, func(d v1alpha1.GPUDevice) bool {
		return d.SharingMode == v1alpha1.SharingTimeSlicing || d.SharingMode == v1alpha1.SharingMPS
	}) {
		return "the node offers replicas of shared GPUs and the evidence shares no device"
	}
	sh, cc := spec.GPUSharing, spec.ConfidentialComputing
	gpuRules := (sh != nil && (len(sh.AllowedModes) > 0 || len(sh.ForbiddenModes) > 0)) || (cc != nil && cc.GPUCCMode != "")
	d := int64(len(devices))
	switch {
	case d == 0 && offered > 0:
		return "the node offers GPUs and the evidence lists none"
	case d == 0 && gpuRules:
		return "the policy has GPU rules and the evidence lists no GPU"
	case offered <= 0 || offered == d:
		return ""
	}
	for _, dev := range devices {
		if dev.SharingMode != v1alpha1.SharingTimeSlicing && dev.SharingMode != v1alpha1.SharingMPS {
			return "the node offers more or fewer GPUs than the evidence lists, unshared"
		}
	}
	if offered%d != 0 {
		return "the node offers GPUs that are not a multiple of the shared devices"
	}
	return ""
}

// sharingModesOf lists the modes a policy judges on a device, written
// apart from the rules: MIG when partitioned (mig, or the older
// sharingMode MIG), and the sharing mode, which for MIG means Exclusive
// and adds nothing to MIG.
func sharingModesOf(d v1alpha1.GPUDevice) (modes []v1alpha1.GPUSharingMode, mig bool, sharing v1alpha1.GPUSharingMode) {
	mig, sharing = d.MIG || d.SharingMode == v1alpha1.SharingMIG, d.SharingMode
	if sharing == v1alpha1.SharingMIG {
		sharing = v1alpha1.SharingExclusive
	}
	if mig {
		modes = append(modes, v1alpha1.SharingMIG)
	}
	if !mig || sharing != v1alpha1.SharingExclusive {
		modes = append(modes, sharing)
	}
	return modes, mig, sharing
}

func contentForbidden(spec *v1alpha1.PlacementPolicySpec, s *v1alpha1.NodeSecurityStateSpec, at time.Time) string {
	for _, d := range s.Devices {
		modes, mig, sharing := sharingModesOf(d)
		if sh := spec.GPUSharing; sh != nil {
			for _, m := range modes {
				if slices.Contains(sh.ForbiddenModes, m) || (len(sh.AllowedModes) > 0 && !slices.Contains(sh.AllowedModes, m)) {
					return "a device's sharing mode " + string(m) + " is not allowed"
				}
			}
			if (len(sh.ForbiddenModes) > 0 || len(sh.AllowedModes) > 0) && !slices.Contains(v1alpha1.GPUSharingModes, d.SharingMode) {
				return "a device's sharing mode is unknown"
			}
		}
		_, firstMIG, firstSharing := sharingModesOf(s.Devices[0])
		if mig != firstMIG || sharing != firstSharing || d.CCMode != s.Devices[0].CCMode ||
			d.MIGProfile != s.Devices[0].MIGProfile {
			return "the devices disagree"
		}
		if cc := spec.ConfidentialComputing; cc != nil && cc.GPUCCMode != "" && d.CCMode != cc.GPUCCMode {
			return "a device's CC mode is wrong"
		}
	}
	cc := spec.ConfidentialComputing
	if cc == nil || (len(cc.TEETypes) == 0 && len(cc.AllowedMeasurements) == 0 && !cc.RequireAttestation) {
		return ""
	}
	t := s.TEE
	switch {
	case t == nil:
		return "there is no TEE"
	case len(cc.TEETypes) > 0 && !slices.Contains(cc.TEETypes, t.Type):
		return "the TEE type is not allowed"
	case len(cc.AllowedMeasurements) > 0 && !slices.Contains(cc.AllowedMeasurements, t.Measurement):
		return "the measurement is not allowed"
	case !cc.RequireAttestation:
		return ""
	case t.Attestation == nil || t.Attestation.Verdict != v1alpha1.AttestationPassed:
		return "the attestation did not pass"
	}
	maxAge := v1alpha1.DefaultMaxAttestationAge
	if cc.MaxAttestationAge != nil {
		maxAge = cc.MaxAttestationAge.Duration
	}
	if age := at.Sub(t.Attestation.VerifiedAt.Time); t.Attestation.VerifiedAt.IsZero() || age > maxAge || -age > DefaultClockSkew {
		return "the attestation is stale or from the future"
	}
	return ""
}

func ptrTo[T any](v T) *T { return &v }

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// chooser turns fuzz bytes into choices; past the end it chooses zero.
type chooser struct {
	data []byte
	i    int
}

func (c *chooser) next() byte {
	if c.i >= len(c.data) {
		return 0
	}
	c.i++
	return c.data[c.i-1]
}

func (c *chooser) flip() bool { return c.next()&1 == 1 }

func pick[T any](c *chooser, options ...T) T { return options[int(c.next())%len(options)] }

func some[T any](c *chooser, options ...T) []T {
	var out []T
	for _, o := range options {
		if c.flip() {
			out = append(out, o)
		}
	}
	return out
}

// offsets are evidence ages around every boundary the rules draw.
var offsets = []time.Duration{
	time.Minute, 0, -20 * time.Second, -31 * time.Second, 10 * time.Minute, 10*time.Minute + time.Second,
	59 * time.Minute, 61 * time.Minute, 3 * time.Hour, -time.Hour, 24 * time.Hour,
}

func generate(c *chooser) *wire.EvaluateRequest {
	req := &wire.EvaluateRequest{
		Profile: pick(c, "", guard.ProfileLab, guard.ProfileProduction, "bogus"),
		Pod:     wire.Pod{Namespace: "ns"},
		Tenant:  pick(c, &wire.Tenant{ID: "acme"}, nil, &wire.Tenant{}, &wire.Tenant{ID: "acme", Pool: "gpu"}),
	}
	if c.next()%4 != 0 {
		req.Policy = generatePolicy(c)
	}
	for i := range int(c.next() % 5) {
		req.Nodes = append(req.Nodes, wire.Node{
			Name:  string(rune('a' + i)),
			UID:   pick[types.UID](c, "", "uid-1", "uid-2"),
			Pool:  pick(c, "acme", "", "gpu", "globex"),
			State: generateState(c),
			// Around every count the rules compare with up to three
			// devices, doubled by checkLargeMatchesAlone.
			AllocatableGPUs: pick(c, nil, ptrTo[int64](0), ptrTo[int64](1), ptrTo[int64](2), ptrTo[int64](3),
				ptrTo[int64](4), ptrTo[int64](6), ptrTo[int64](7), ptrTo[int64](12), ptrTo[int64](-1)),
			AllocatableSharedGPUs: pick(c, nil, nil, ptrTo[int64](0), ptrTo[int64](1), ptrTo[int64](2), ptrTo[int64](-1)),
		})
	}
	return req
}

func generatePolicy(c *chooser) *wire.Policy {
	spec := v1alpha1.PlacementPolicySpec{
		Confinement: pick(c, v1alpha1.ConfinementPool, "", v1alpha1.ConfinementAny, "Odd"),
		Evidence: v1alpha1.EvidencePolicy{
			AcceptedSources: some(c, v1alpha1.SourceAttested, v1alpha1.SourceNFD, v1alpha1.SourceMock, ""),
			MaxAge:          pick(c, nil, &metav1.Duration{Duration: pick(c, offsets...)}),
		},
	}
	if c.flip() {
		spec.GPUSharing = &v1alpha1.GPUSharingPolicy{
			AllowedModes:   some(c, append(v1alpha1.GPUSharingModes, "")...),
			ForbiddenModes: some(c, append(v1alpha1.GPUSharingModes, "")...),
		}
	}
	if c.flip() {
		spec.ConfidentialComputing = &v1alpha1.ConfidentialComputingPolicy{
			TEETypes:            some(c, append(v1alpha1.TEETypes, "")...),
			GPUCCMode:           pick(c, "", v1alpha1.CCModeOn, v1alpha1.CCModeOff, "Weird"),
			AllowedMeasurements: some(c, measurementA, measurementB, ""),
			RequireAttestation:  c.flip(),
			MaxAttestationAge:   pick(c, nil, &metav1.Duration{Duration: pick(c, offsets...)}),
		}
	}
	return &wire.Policy{Name: "fuzz", Spec: spec}
}

func generateState(c *chooser) *v1alpha1.NodeSecurityStateSpec {
	if c.flip() {
		return nil
	}
	s := &v1alpha1.NodeSecurityStateSpec{
		NodeUID:     pick[types.UID](c, "uid-1", "uid-2", ""),
		Incarnation: "inc",
		ObservedAt:  pick(c, ago(pick(c, offsets...)), metav1.Time{}),
		Source:      pick(c, v1alpha1.SourceNFD, v1alpha1.SourceAttested, v1alpha1.SourceMock, "", "rumour"),
		Complete:    c.next()%4 != 0,
	}
	for i := range int(c.next() % 4) {
		s.Devices = append(s.Devices, v1alpha1.GPUDevice{
			ID:          string(rune('0' + i)),
			MIG:         c.next()%4 == 1,
			SharingMode: pick(c, append(v1alpha1.GPUSharingModes, "", "Odd")...),
			MIGProfile:  pick(c, "", "1g.10gb"),
			CCMode:      pick(c, append(v1alpha1.GPUCCModes, "", "Odd")...),
		})
	}
	if c.flip() {
		s.TEE = &v1alpha1.TEEFacts{
			Type:        pick(c, append(v1alpha1.TEETypes, "", "Odd")...),
			Measurement: pick(c, measurementA, measurementB, ""),
		}
		if c.flip() {
			s.TEE.Attestation = &v1alpha1.Attestation{
				Verdict:    pick(c, v1alpha1.AttestationPassed, v1alpha1.AttestationFailed, "", "Odd"),
				VerifiedAt: pick(c, ago(pick(c, offsets...)), metav1.Time{}),
			}
		}
	}
	return s
}
