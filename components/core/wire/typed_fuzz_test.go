package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/internal/strictjson"
)

// FuzzTypedDecoders checks the decoders written for the request and the
// answer against the reflective strict decoder they replace: for every
// document, both refuse with the same error (path, offset and message) or
// both accept and build the same value, down to nil versus empty lists and
// the time zone of timestamps. The reflective decoder is in turn checked
// against encoding/json by strictjson's FuzzUnmarshal.
//
// Every list of nodes is a candidate for decoding in two halves here, so
// that the fuzzer also checks that path against the reflective decoder.
func FuzzTypedDecoders(f *testing.F) {
	withParallel(f)
	full, _ := json.Marshal(fullRequest())
	f.Add(full)
	answer, _ := json.Marshal(fullResponse())
	f.Add(answer)
	for _, seed := range []string{
		`{"pod":{"namespace":"a"},"nodes":[]}`,
		`{"pod":{"namespace":"a"},"nodes":null,"tenant":null,"policy":null}`,
		`{"pod":{"namespace":"a"},"nodes":[{"name":"n","state":null},{"name":"m","state":{"devices":[],"tee":{"attestation":null}}}]}`,
		`{"pod":{"namespace":"a"},"nodes":[{"name":"n","state":{"devices":[{"id":"a"},{"id":"b"}]}},{"name":"m","state":{"devices":[{"id":"c"}]}}]}`,
		`{"policy":{"spec":{"evidence":{"acceptedSources":[],"maxAge":null},"gpuSharing":{"allowedModes":null},"confidentialComputing":{"teeTypes":[],"maxAttestationAge":"1m"}}}}`,
		`{"policy":{"spec":{"podSecurity":"restricted","confinement":"Pool"}}}`, `{"policy":{"spec":{"podSecurity":null}}}`,
		`{"pod":{"namespace":"a","nmae":"x"}}`, `{"nodes":[{"state":{"tee":{"attestation":{"verifiedAt":"x"}}}}]}`,
		`{"pod":{},"pod":{}}`, `{"nodes":[{"state":{"complete":null}}]}`, `null`, ` `, `{} x`, `{"profile":1}`,
		`{"nodes":[{"name":"n","allocatableGPUs":8},{"allocatableGPUs":null},{"allocatableGPUs":-9223372036854775808}]}`,
		`{"nodes":[{"allocatableGPUs":9223372036854775808}]}`, `{"nodes":[{"allocatableGPUs":1.0}]}`, `{"nodes":[{"allocatableGPUs":"1"}]}`,
		`{"nodes":[{"allocatableGPUs":1,"allocatableGPUs":1}]}`, `{"nodes":[{"allocatableGPUs":01}]}`,
		`{"nodes":[{"state":{"devices":[{"id":"a","mig":true,"sharingMode":"TimeSlicing"},{"mig":null},{"mig":false,"mig":true}]}}]}`,
		`{"profile":"lab","evaluatedAt":null,"pod":{"decision":"allow","reasons":[],"message":"m"},"results":[{"node":"n","reasons":null,"later":[1,{"x":{}}]}]}`,
		`{"results":[{"reasons":["A","B"]},{"reasons":["C"]}],"future":{"a":[]}}`,
		`{"results":[{"node":"n","node":"m"}]}`, `{"evaluatedAt":"2026-03-01T12:00:00+02:00"}`,
	} {
		f.Add([]byte(seed))
	}
	// reused decodes every input after the full request, and after the
	// inputs before it: what it returns must not depend on that history.
	var reused requestDecoder
	f.Fuzz(func(t *testing.T, body []byte) {
		var want EvaluateRequest
		wantErr := strictjson.Unmarshal(body, &want)
		got, err := decodeRequest(string(body))
		compare(t, "request", body, &want, wantErr, got, err)
		if _, err := reused.decode(string(full)); err != nil {
			t.Fatal(err)
		}
		got, err = reused.decode(string(body))
		compare(t, "request (reused decoder)", body, &want, wantErr, got, err)

		var wantResp EvaluateResponse
		wantErr = strictjson.Unmarshal(body, &wantResp, strictjson.IgnoreUnknownFields())
		gotResp, err := DecodeEvaluateResponse(string(body))
		compare(t, "answer", body, &wantResp, wantErr, gotResp, err)
	})
}

// exactTime compares timestamps field by field, time zone included.
var exactTime = cmp.Comparer(func(a, b metav1.Time) bool { return a.Time == b.Time })

func compare[T any](t *testing.T, what string, body []byte, want *T, wantErr error, got *T, err error) {
	t.Helper()
	if wantErr != nil || err != nil {
		var we, ge *strictjson.Error
		if !errors.As(wantErr, &we) || !errors.As(err, &ge) || *we != *ge {
			t.Fatalf("%s %q: typed decoder error %v, reflective decoder error %v", what, body, err, wantErr)
		}
		return
	}
	if diff := cmp.Diff(want, got, exactTime); diff != "" {
		t.Fatalf("%s %q: decoders disagree (-reflective +typed):\n%s", what, body, diff)
	}
}

func fullResponse() *EvaluateResponse {
	return &EvaluateResponse{
		Profile: guard.ProfileLab, EvaluatedAt: fullRequest().Nodes[0].State.ObservedAt,
		Pod: Verdict{Decision: guard.DecisionAllow, Reasons: []guard.Reason{}, Message: "tenant acme"},
		Results: []NodeResult{
			{Node: "node-1", Decision: guard.DecisionDeny, Reasons: []guard.Reason{guard.ReasonMIGForbidden, guard.ReasonTEEMissing},
				Message: "MIG_FORBIDDEN: <no> & \"quotes\"", Incarnation: "inc-1"},
			{Node: "node-2", Decision: guard.DecisionIndeterminate, Reasons: []guard.Reason{guard.ReasonEvidenceMissing}, Message: "x"},
			{Node: "node-3", Decision: guard.DecisionAllow},
		},
	}
}

// TestFieldTables checks that each table of members names the fields of
// its type, in order, as the reflective decoder reads them.
func TestFieldTables(t *testing.T) {
	tables := map[reflect.Type]*strictjson.Fields{}
	var walk func(reflect.Type)
	seen := map[reflect.Type]bool{}
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ == reflect.TypeFor[metav1.Time]() || typ == reflect.TypeFor[metav1.Duration]() {
			return
		}
		seen[typ] = true
		var names []string
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			names = append(names, name)
			walk(typ.Field(i).Type)
		}
		tables[typ] = strictjson.NewFields(names...)
	}
	walk(reflect.TypeFor[EvaluateRequest]())
	walk(reflect.TypeFor[EvaluateResponse]())
	ours := map[string]*strictjson.Fields{
		"EvaluateRequest": requestFields, "Pod": podFields, "Tenant": tenantFields, "Policy": policyFields,
		"PlacementPolicySpec": policySpecFields, "EvidencePolicy": evidenceFields, "GPUSharingPolicy": sharingFields,
		"ConfidentialComputingPolicy": ccFields, "Node": nodeFields, "NodeSecurityStateSpec": stateFields,
		"GPUDevice": deviceFields, "TEEFacts": teeFields, "Attestation": attestationFields,
		"EvaluateResponse": responseFields, "Verdict": verdictFields, "NodeResult": nodeResultFields,
	}
	if len(ours) != len(tables) {
		t.Errorf("the types have %d structs, the decoders %d tables", len(tables), len(ours))
	}
	for typ, want := range tables {
		got, ok := ours[typ.Name()]
		if !ok {
			t.Errorf("no table for %s", typ)
			continue
		}
		if diff := cmp.Diff(want.Names(), got.Names()); diff != "" {
			t.Errorf("%s (-type +table):\n%s", typ, diff)
		}
	}
}
