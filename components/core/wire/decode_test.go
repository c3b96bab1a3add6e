package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// fullRequest sets every field of the request, so that a decoder that
// forgets one fails the round trip.
func fullRequest() *EvaluateRequest {
	at := metav1.NewTime(time.Date(2026, 3, 1, 11, 59, 0, 0, time.UTC).Local())
	return &EvaluateRequest{
		Profile: guard.ProfileLab,
		Pod:     Pod{Namespace: "acme-ml", Name: "train-0", UID: "pod-uid"},
		Tenant:  &Tenant{ID: "acme", Pool: "acme-gpu"},
		Policy: &Policy{Name: "strict", Spec: v1alpha1.PlacementPolicySpec{
			Confinement: v1alpha1.ConfinementAny,
			Evidence: v1alpha1.EvidencePolicy{
				AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested, v1alpha1.SourceNFD},
				MaxAge:          &metav1.Duration{Duration: 5 * time.Minute},
			},
			GPUSharing: &v1alpha1.GPUSharingPolicy{
				AllowedModes:   []v1alpha1.GPUSharingMode{v1alpha1.SharingExclusive, v1alpha1.SharingMIG},
				ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing},
			},
			ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{
				TEETypes:            []v1alpha1.TEEType{v1alpha1.TEETDX},
				GPUCCMode:           v1alpha1.CCModeOn,
				AllowedMeasurements: []v1alpha1.Measurement{v1alpha1.Measurement("sha256:" + strings.Repeat("0", 64))},
				RequireAttestation:  true,
				MaxAttestationAge:   &metav1.Duration{Duration: 30 * time.Minute},
			},
			PodSecurity: v1alpha1.PodSecurityRestricted,
		}},
		Nodes: []Node{{
			Name: "node-1", UID: "uid-1", Pool: "acme-gpu", AllocatableGPUs: ptrTo[int64](2),
			State: &v1alpha1.NodeSecurityStateSpec{
				NodeUID: "uid-1", Incarnation: "inc-1", ObservedAt: at, Source: v1alpha1.SourceAttested, Complete: true,
				Devices: []v1alpha1.GPUDevice{{ID: "gpu-0", Vendor: "nvidia", Model: "H100",
					SharingMode: v1alpha1.SharingMIG, MIGProfile: "1g.10gb", CCMode: v1alpha1.CCModeOn},
					{ID: "gpu-1", Vendor: "nvidia", Model: "H100", MIG: true,
						SharingMode: v1alpha1.SharingExclusive, MIGProfile: "1g.10gb", CCMode: v1alpha1.CCModeOn}},
				TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEETDX, Measurement: v1alpha1.Measurement("sha384:" + strings.Repeat("f", 96)),
					Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, VerifiedAt: at, Verifier: "kbs"}},
			},
		}, {Name: "node-2"}},
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestDecodeRoundTrip(t *testing.T) {
	want := fullRequest()
	body, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEvaluateRequest(body, Limits{})
	if err != nil {
		t.Fatalf("DecodeEvaluateRequest() error = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

// patch decodes the full request as generic JSON, lets f change it, and
// encodes it again.
func patch(t *testing.T, f func(doc map[string]any)) []byte {
	t.Helper()
	body, _ := json.Marshal(fullRequest())
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	f(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func obj(v any, keys ...any) map[string]any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v.(map[string]any)
}

func TestDecodeRefuses(t *testing.T) {
	cases := []struct {
		name   string
		body   func(t *testing.T) []byte
		limits Limits
		// want lists "field: detail" prefixes, in order.
		want []string
	}{{
		name: "syntax error",
		body: func(*testing.T) []byte { return []byte(`{"pod":`) },
		want: []string{": malformed JSON at byte 7: unexpected end of JSON input"},
	}, {
		name: "trailing data",
		body: func(*testing.T) []byte { return []byte(`{"pod":{"namespace":"a"},"nodes":[]} {}`) },
		want: []string{": malformed JSON at byte 38: invalid character '{' after top-level value"},
	}, {
		name: "unknown field deep inside",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "nodes", 0, "state", "devices", 0)["colour"] = "green" })
		},
		want: []string{"nodes[0].state.devices[0].colour: unknown field"},
	}, {
		name: "unknown field of a node names allocatableGPUs",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "nodes", 0)["allocatableGpus"] = 2 })
		},
		want: []string{"nodes[0].allocatableGpus: unknown field"},
	}, {
		name: "allocatableGPUs twice",
		body: func(*testing.T) []byte {
			return []byte(`{"pod":{"namespace":"a"},"nodes":[{"name":"n","allocatableGPUs":1,"allocatableGPUs":2}]}`)
		},
		want: []string{"nodes[0].allocatableGPUs: duplicate field"},
	}, {
		name: "allocatableGPUs not an integer",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "nodes", 0)["allocatableGPUs"] = 1.5 })
		},
		want: []string{"nodes[0].allocatableGPUs: must be int64, not a JSON number 1.5"},
	}, {
		name: "allocatableGPUs a string",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "nodes", 0)["allocatableGPUs"] = "8" })
		},
		want: []string{"nodes[0].allocatableGPUs: must be int64, not a JSON string"},
	}, {
		name: "allocatableGPUs beyond int64",
		body: func(*testing.T) []byte {
			return []byte(`{"pod":{"namespace":"a"},"nodes":[{"name":"n","allocatableGPUs":9223372036854775808}]}`)
		},
		want: []string{"nodes[0].allocatableGPUs: must be int64, not a JSON number 9223372036854775808"},
	}, {
		name: "negative allocatableGPUs",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "nodes", 0)["allocatableGPUs"] = -1 })
		},
		want: []string{"nodes[0].allocatableGPUs: Invalid value: -1: must not be negative"},
	}, {
		name: "mig not a boolean",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "nodes", 0, "state", "devices", 1)["mig"] = "yes" })
		},
		want: []string{"nodes[0].state.devices[1].mig: must be bool, not a JSON string"},
	}, {
		name: "malformed timestamp",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "nodes", 0, "state")["observedAt"] = "yesterday" })
		},
		want: []string{`nodes[0].state.observedAt: parsing time "yesterday"`},
	}, {
		name: "missing timestamp",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { delete(obj(d, "nodes", 0, "state"), "observedAt") })
		},
		want: []string{"nodes[0].state.observedAt: Required value"},
	}, {
		name: "wrong type",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "nodes", 0, "state")["complete"] = "yes" })
		},
		want: []string{"nodes[0].state.complete: must be bool, not a JSON string"},
	}, {
		name: "malformed duration",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "policy", "spec", "evidence")["maxAge"] = "soon" })
		},
		want: []string{`policy.spec.evidence.maxAge: time: invalid duration "soon"`},
	}, {
		name: "duration too short",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "policy", "spec", "evidence")["maxAge"] = "10ms" })
		},
		want: []string{`policy.spec.evidence.maxAge: Invalid value: "10ms": must be at least 1s`},
	}, {
		name: "enum values",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) {
				obj(d, "policy", "spec")["confinement"] = "Anywhere"
				obj(d, "policy", "spec", "evidence")["acceptedSources"] = []string{"rumour", "nfd", "nfd"}
				obj(d, "nodes", 0, "state", "devices", 0)["sharingMode"] = "Shared"
				obj(d, "nodes", 0, "state", "tee", "attestation")["verdict"] = "Maybe"
			})
		},
		want: []string{
			`policy.spec.confinement: Unsupported value: "Anywhere": supported values: "Pool", "Any"`,
			`policy.spec.evidence.acceptedSources[0]: Unsupported value: "rumour"`,
			`policy.spec.evidence.acceptedSources[2]: Duplicate value: "nfd"`,
			`nodes[0].state.devices[0].sharingMode: Unsupported value: "Shared"`,
			`nodes[0].state.devices[0].migProfile: Invalid value: "1g.10gb": migProfile needs mig: true (or sharingMode: MIG)`,
			`nodes[0].state.tee.attestation.verdict: Unsupported value: "Maybe"`,
		},
	}, {
		name: "mock listed in a policy",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "policy", "spec", "evidence")["acceptedSources"] = []string{"mock"} })
		},
		want: []string{`policy.spec.evidence.acceptedSources: Invalid value: ["mock"]: mock cannot be listed`},
	}, {
		name: "sharing mode both allowed and forbidden",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) { obj(d, "policy", "spec", "gpuSharing")["forbiddenModes"] = []string{"MIG"} })
		},
		want: []string{`policy.spec.gpuSharing: Invalid value: "MIG": a sharing mode cannot be both allowed and forbidden`},
	}, {
		name: "malformed measurements",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) {
				obj(d, "policy", "spec", "confidentialComputing")["allowedMeasurements"] = []string{"sha256:ABC", "md5:00"}
				obj(d, "nodes", 0, "state", "tee")["measurement"] = "sha256:" + strings.Repeat("0", 63)
			})
		},
		want: []string{
			`policy.spec.confidentialComputing.allowedMeasurements[0]: Invalid value: "sha256:ABC": must be sha256:<64 lowercase hex> or sha384:<96 lowercase hex>`,
			`policy.spec.confidentialComputing.allowedMeasurements[1]: Invalid value: "md5:00"`,
			`nodes[0].state.tee.measurement: Invalid value`,
		},
	}, {
		name: "attestation age without attestation",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) {
				delete(obj(d, "policy", "spec", "confidentialComputing"), "requireAttestation")
			})
		},
		want: []string{`policy.spec.confidentialComputing.maxAttestationAge: Invalid value: "30m0s": maxAttestationAge needs requireAttestation: true`},
	}, {
		name: "request fields",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) {
				d["profile"] = "relaxed"
				obj(d, "pod")["namespace"] = ""
				obj(d, "tenant")["id"] = ""
				obj(d, "policy")["name"] = ""
			})
		},
		want: []string{
			`profile: Unsupported value: "relaxed": supported values: "production", "lab"`,
			`pod.namespace: Required value`,
			`tenant.id: Required value`,
			`policy.name: Required value`,
		},
	}, {
		name: "node fields",
		body: func(t *testing.T) []byte {
			return patch(t, func(d map[string]any) {
				nodes := d["nodes"].([]any)
				obj(nodes[1])["name"] = "node-1"
				nodes = append(nodes, map[string]any{"name": ""})
				d["nodes"] = nodes
				state := obj(nodes[0], "state")
				state["nodeUID"], state["incarnation"], state["source"] = "", "", "rumour"
				devices := state["devices"].([]any)
				state["devices"] = append(devices, devices[0])
			})
		},
		want: []string{
			`nodes[0].state.nodeUID: Required value`,
			`nodes[0].state.incarnation: Required value`,
			`nodes[0].state.source: Unsupported value: "rumour"`,
			`nodes[0].state.devices[2].id: Duplicate value: "gpu-0"`,
			`nodes[1].name: Duplicate value: "node-1"`,
			`nodes[2].name: Required value`,
		},
	}, {
		name:   "too many nodes",
		body:   func(t *testing.T) []byte { b, _ := json.Marshal(fullRequest()); return b },
		limits: Limits{MaxNodes: 1},
		want:   []string{"nodes: Too many: 2: must have at most 1 item"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEvaluateRequest(tc.body(t), tc.limits)
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("DecodeEvaluateRequest() error = %v, want a *RequestError", err)
			}
			var got []string
			for _, fe := range re.Errors {
				got = append(got, fe.Field+": "+fe.Detail)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestRequestErrorIsShort(t *testing.T) {
	req := fullRequest()
	req.Nodes = nil
	for i := range 50 {
		req.Nodes = append(req.Nodes, Node{Name: fmt.Sprintf("n%d", i), State: &v1alpha1.NodeSecurityStateSpec{}})
	}
	body, _ := json.Marshal(req)
	_, err := DecodeEvaluateRequest(body, Limits{})
	var re *RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error = %v, want a *RequestError", err)
	}
	if len(re.Errors) != maxReportedErrors || re.Omitted != 50*4-maxReportedErrors {
		t.Errorf("listed %d and omitted %d errors, want %d and %d", len(re.Errors), re.Omitted, maxReportedErrors, 50*4-maxReportedErrors)
	}
	if msg := re.Error(); !strings.HasPrefix(msg, "nodes[0].state.nodeUID: Required value; ") || !strings.HasSuffix(msg, "; and 180 more") {
		t.Errorf("Error() = %q", msg)
	}
	if resp := re.Response(); resp.Message != re.Error() || len(resp.Errors) != maxReportedErrors {
		t.Errorf("Response() = %+v", resp)
	}
}

func TestDecodeRefusesSharedGPUsBeyondTheGPUs(t *testing.T) {
	for name, body := range map[string]string{
		"more replicas than GPUs": `{"pod":{"namespace":"ns"},"nodes":[{"name":"n","allocatableGPUs":1,"allocatableSharedGPUs":2}]}`,
		"replicas of no GPUs":     `{"pod":{"namespace":"ns"},"nodes":[{"name":"n","allocatableSharedGPUs":1}]}`,
		"negative replicas":       `{"pod":{"namespace":"ns"},"nodes":[{"name":"n","allocatableGPUs":1,"allocatableSharedGPUs":-1}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeEvaluateRequest([]byte(body), Limits{}); err == nil || !strings.Contains(err.Error(), "allocatableSharedGPUs") {
				t.Errorf("DecodeEvaluateRequest() error = %v, want one naming allocatableSharedGPUs", err)
			}
		})
	}
}
