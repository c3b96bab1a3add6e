package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func checkSameAsEncodingJSON(t *testing.T, r *EvaluateRequest) {
	t.Helper()
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendRequest(nil, r); string(got) != string(want) {
		t.Errorf("AppendRequest differs from encoding/json:\n got %s\nwant %s", got, want)
	}
}

func TestAppendRequest(t *testing.T) {
	cases := map[string]*EvaluateRequest{
		"full":    fullRequest(),
		"minimal": {},
		"empty lists": {Nodes: []Node{}, Policy: &Policy{Spec: v1alpha1.PlacementPolicySpec{
			Evidence:              v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{}},
			GPUSharing:            &v1alpha1.GPUSharingPolicy{AllowedModes: []v1alpha1.GPUSharingMode{}},
			ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{},
		}}},
		"only forbidden modes and attestation age": {Policy: &Policy{Spec: v1alpha1.PlacementPolicySpec{
			GPUSharing:            &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{"MPS"}},
			ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{MaxAttestationAge: &metav1.Duration{Duration: 1500 * time.Microsecond}},
		}}},
		"zero times and false": {Nodes: []Node{{Name: "n", State: &v1alpha1.NodeSecurityStateSpec{
			Devices: []v1alpha1.GPUDevice{{}}, TEE: &v1alpha1.TEEFacts{Attestation: &v1alpha1.Attestation{}},
		}}}},
		"allocatable counts": {Nodes: []Node{{Name: "zero", AllocatableGPUs: ptrTo[int64](0)},
			{Name: "most", AllocatableGPUs: ptrTo[int64](math.MaxInt64)}, {Name: "least", AllocatableGPUs: ptrTo[int64](math.MinInt64)}}},
		"awkward strings": {Pod: Pod{Namespace: "<a>&\"b\"\\ \n\r\t\b\f\x00\x1f\x7f é \u2028\u2029 \xff\xfe 😀"}},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) { checkSameAsEncodingJSON(t, r) })
	}
}

// TestAppendRequestCoversEveryField fills every field of every type the
// request can hold, so that a field added to the API without a line in
// AppendRequest fails here.
func TestAppendRequestCoversEveryField(t *testing.T) {
	var r EvaluateRequest
	fill(reflect.ValueOf(&r).Elem(), 0)
	checkSameAsEncodingJSON(t, &r)
}

// fill sets every field of v to a distinct non-zero value.
func fill(v reflect.Value, n int) int {
	switch v.Type() {
	case reflect.TypeFor[metav1.Time]():
		v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC))))
		return n + 1
	case reflect.TypeFor[metav1.Duration]():
		v.Set(reflect.ValueOf(metav1.Duration{Duration: time.Duration(n+1) * time.Second}))
		return n + 1
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return fill(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			n = fill(v.Field(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		n = fill(v.Index(0), n)
		n = fill(v.Index(1), n)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", n))
		return n + 1
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int64:
		v.SetInt(int64(n + 1))
		return n + 1
	default:
		panic("fill: unexpected kind " + v.Kind().String())
	}
	return n
}

// FuzzAppendRequest checks the encoder against encoding/json on arbitrary
// strings, times and flags.
func FuzzAppendRequest(f *testing.F) {
	encodeInHalves(f)
	f.Add("acme", "node-1", "<&>", int64(0), true)
	f.Add("\xff\u2028", "\x00", "é", int64(1767225600), false)
	f.Add("a", "", "", int64(-1), true)
	f.Fuzz(func(t *testing.T, a, b, c string, unix int64, flag bool) {
		at := metav1.NewTime(time.Unix(unix%(1<<40), 0))
		r := &EvaluateRequest{
			Profile: guard.Profile(c), Pod: Pod{Namespace: a, Name: b, UID: "u"},
			Tenant: &Tenant{ID: b, Pool: c},
			Policy: &Policy{Name: c, Spec: v1alpha1.PlacementPolicySpec{
				Confinement: v1alpha1.Confinement(a),
				Evidence:    v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.EvidenceSource(b)}},
				ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{
					AllowedMeasurements: []v1alpha1.Measurement{v1alpha1.Measurement(c)}, RequireAttestation: flag},
			}},
			Nodes: []Node{{Name: a, Pool: b, AllocatableGPUs: &unix, State: &v1alpha1.NodeSecurityStateSpec{
				NodeUID: "u", Incarnation: c, ObservedAt: at, Source: v1alpha1.EvidenceSource(a), Complete: flag,
				Devices: []v1alpha1.GPUDevice{{ID: b, Model: c, MIG: flag, MIGProfile: a}},
				TEE:     &v1alpha1.TEEFacts{Type: v1alpha1.TEEType(c), Attestation: &v1alpha1.Attestation{Verdict: "v", VerifiedAt: at, Verifier: b}},
			}}},
		}
		checkSameAsEncodingJSON(t, r)
		// Three nodes: encoded in two halves, as parallelEncodeNodes is
		// lowered below.
		r.Nodes = append(r.Nodes, r.Nodes[0], r.Nodes[0])
		checkSameAsEncodingJSON(t, r)
	})
}

// encodeInHalves makes lists of two nodes or more encode in two halves,
// on at least two CPUs, for the rest of the test.
func encodeInHalves(t testing.TB) { lowerOnTwoCPUs(t, &parallelEncodeNodes, 2) }

// TestAppendRequestInHalves encodes lists of every small length, and a
// long one, in two halves: the bytes must be encoding/json's.
func TestAppendRequestInHalves(t *testing.T) {
	encodeInHalves(t)
	r := fullRequest()
	node := r.Nodes[0]
	for _, n := range []int{0, 1, 2, 3, 4, 5, 777} {
		r.Nodes = r.Nodes[:0]
		for i := range n {
			node.Name = fmt.Sprintf("node-%d", i)
			r.Nodes = append(r.Nodes, node)
		}
		checkSameAsEncodingJSON(t, r)
	}
}

func checkResponseSameAsEncodingJSON(t *testing.T, r *EvaluateResponse) {
	t.Helper()
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendResponse(nil, r); string(got) != string(want) {
		t.Errorf("AppendResponse differs from encoding/json:\n got %s\nwant %s", got, want)
	}
}

func TestAppendResponse(t *testing.T) {
	cases := map[string]*EvaluateResponse{
		"full":        fullResponse(),
		"minimal":     {},
		"empty lists": {Pod: Verdict{Reasons: []guard.Reason{}}, Results: []NodeResult{{Reasons: []guard.Reason{}}}},
		"awkward strings": {Pod: Verdict{Message: "<a>&\"b\"\\ \n\r\t\b\f\x00\x1f\x7f é \u2028\u2029 \xff\xfe 😀"},
			Results: []NodeResult{{Node: "\u2028", Incarnation: "<>"}}},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) { checkResponseSameAsEncodingJSON(t, r) })
	}
}

// TestAppendResponseCoversEveryField fills every field of the answer, so
// that a field added without a line in AppendResponse fails here.
func TestAppendResponseCoversEveryField(t *testing.T) {
	var r EvaluateResponse
	fill(reflect.ValueOf(&r).Elem(), 0)
	checkResponseSameAsEncodingJSON(t, &r)
}

// FuzzAppendResponse checks the answer encoder against encoding/json on
// arbitrary strings and times.
func FuzzAppendResponse(f *testing.F) {
	f.Add("allow", "node-1", "<&>", int64(0))
	f.Add("\xff\u2028", "", "é", int64(1767225600))
	f.Fuzz(func(t *testing.T, a, b, c string, unix int64) {
		r := &EvaluateResponse{
			Profile: guard.Profile(a), EvaluatedAt: metav1.NewTime(time.Unix(unix%(1<<40), 0)),
			Pod: Verdict{Decision: guard.Decision(a), Reasons: []guard.Reason{guard.Reason(b)}, Message: c},
			Results: []NodeResult{
				{Node: a, Decision: guard.Decision(b), Reasons: []guard.Reason{guard.Reason(c), guard.Reason(a)}, Message: b, Incarnation: c},
				{Node: c, Reasons: []guard.Reason{}},
			},
		}
		checkResponseSameAsEncodingJSON(t, r)
	})
}
