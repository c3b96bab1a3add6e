//go:build integration

package integration

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestIntegrationCRDsInstalled(t *testing.T) {
	type shape struct {
		Scope      apiextensionsv1.ResourceScope
		ShortNames []string
		Categories []string
		Status     bool
		Columns    []string
	}
	want := map[string]shape{
		"placementpolicies.guard.xila.us": {apiextensionsv1.ClusterScoped, []string{"gpp"}, []string{"xila-guard"}, true,
			[]string{"Confinement", "Sources", "Max Age", "Bindings", "Ready", "Age"}},
		"tenantbindings.guard.xila.us": {apiextensionsv1.ClusterScoped, []string{"gtb"}, []string{"xila-guard"}, true,
			[]string{"Tenant", "Pool", "Policy", "Nodes", "Ready", "Age"}},
		"nodesecuritystates.guard.xila.us": {apiextensionsv1.ClusterScoped, []string{"nss"}, []string{"xila-guard"}, true,
			[]string{"Tenant", "Decision", "Source", "Complete", "Ready", "Observed", "Incarnation", "Age"}},
	}
	for name, want := range want {
		t.Run(name, func(t *testing.T) {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
				t.Fatal(err)
			}
			v := crd.Spec.Versions[0]
			got := shape{crd.Spec.Scope, crd.Spec.Names.ShortNames, crd.Spec.Names.Categories,
				v.Subresources != nil && v.Subresources.Status != nil, nil}
			for _, c := range v.AdditionalPrinterColumns {
				got.Columns = append(got.Columns, c.Name)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("CRD shape (-want +got):\n%s", diff)
			}
			if v.Name != "v1alpha1" || !v.Served || !v.Storage {
				t.Errorf("version %s served=%v storage=%v, want v1alpha1 served and stored", v.Name, v.Served, v.Storage)
			}
		})
	}
}

// object decodes a manifest into an unstructured object, so that tests can
// send what the Go types could not express.
func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("bad test manifest: %v\n%s", err, manifest)
	}
	return u
}

func TestIntegrationValidObjectsAccepted(t *testing.T) {
	policy := &v1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-strict"},
		Spec: v1alpha1.PlacementPolicySpec{
			Evidence: v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested, v1alpha1.SourceNFD}},
			GPUSharing: &v1alpha1.GPUSharingPolicy{
				AllowedModes:   []v1alpha1.GPUSharingMode{v1alpha1.SharingExclusive, v1alpha1.SharingMIG},
				ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing},
			},
			ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{
				TEETypes:            []v1alpha1.TEEType{v1alpha1.TEESEVSNP},
				GPUCCMode:           v1alpha1.CCModeOn,
				AllowedMeasurements: []v1alpha1.Measurement{v1alpha1.Measurement("sha384:" + strings.Repeat("ab", 48))},
				RequireAttestation:  true,
				MaxAttestationAge:   &metav1.Duration{Duration: 90 * time.Minute},
			},
		},
	}
	if err := k8s.Create(ctx, policy); err != nil {
		t.Fatalf("creating PlacementPolicy: %v", err)
	}
	// The API server applies the defaults the evaluator also assumes.
	if policy.Spec.Confinement != v1alpha1.ConfinementPool || policy.Spec.Evidence.MaxAge == nil ||
		policy.Spec.Evidence.MaxAge.Duration != v1alpha1.DefaultMaxEvidenceAge {
		t.Errorf("defaults: confinement %q, maxAge %v; want Pool and %s", policy.Spec.Confinement, policy.Spec.Evidence.MaxAge, v1alpha1.DefaultMaxEvidenceAge)
	}

	binding := &v1alpha1.TenantBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "acme"},
		Spec: v1alpha1.TenantBindingSpec{TenantID: "acme", Namespaces: []string{"acme-ml", "acme-web"},
			EffectivePolicyRef: &v1alpha1.PolicyReference{Name: "acme-strict"}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatalf("creating TenantBinding: %v", err)
	}

	observed := metav1.NewTime(time.Now().Truncate(time.Second))
	state := &v1alpha1.NodeSecurityState{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1"},
		Spec: v1alpha1.NodeSecurityStateSpec{
			NodeUID: "6c1f0f4e-1b7a-4c43-9b1e-0d2f3a4b5c6d", Incarnation: "boot-1", ObservedAt: observed,
			Source: v1alpha1.SourceAttested, Complete: true,
			Devices: []v1alpha1.GPUDevice{
				{ID: "GPU-0", Vendor: "nvidia", Model: "H100", SharingMode: v1alpha1.SharingMIG, MIGProfile: "1g.10gb", CCMode: v1alpha1.CCModeOn},
				{ID: "GPU-1", Vendor: "nvidia", Model: "H100", SharingMode: v1alpha1.SharingMIG, MIGProfile: "1g.10gb", CCMode: v1alpha1.CCModeOn},
				{ID: "GPU-2", Vendor: "nvidia", Model: "H100", MIG: true, SharingMode: v1alpha1.SharingTimeSlicing, MIGProfile: "1g.10gb", CCMode: v1alpha1.CCModeOn},
			},
			TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP, Measurement: v1alpha1.Measurement("sha256:" + strings.Repeat("0", 64)),
				HostData: strings.Repeat("42", 32), SNPTCB: &v1alpha1.SNPTCB{BootLoader: 3, SNP: 8, Microcode: 115}, ChipID: strings.Repeat("c3", 64),
				Attestation: &v1alpha1.Attestation{Verdict: v1alpha1.AttestationPassed, VerifiedAt: observed, Verifier: "kbs", RootOfTrust: v1alpha1.RootAMD}},
		},
	}
	if err := k8s.Create(ctx, state); err != nil {
		t.Fatalf("creating NodeSecurityState: %v", err)
	}

	// Status is a subresource: writes go through it, with conditions.
	state.Status = v1alpha1.NodeSecurityStateStatus{
		ObservedGeneration: state.Generation,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Fresh",
			Message: "evidence is fresh and complete", LastTransitionTime: observed}},
		Evaluation: &v1alpha1.NodeEvaluation{TenantID: "acme", PolicyName: "acme-strict", Decision: "allow", EvaluatedAt: observed},
	}
	if err := k8s.Status().Update(ctx, state); err != nil {
		t.Fatalf("updating NodeSecurityState status: %v", err)
	}
	var got v1alpha1.NodeSecurityState
	if err := k8s.Get(ctx, client.ObjectKey{Name: "gpu-node-1"}, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(state.Spec, got.Spec); diff != "" {
		t.Errorf("stored spec (-sent +stored):\n%s", diff)
	}
	if got.Status.Evaluation == nil || got.Status.Evaluation.Decision != "allow" {
		t.Errorf("stored status %+v", got.Status)
	}

	// Printer columns and short names, as an operator sees them.
	out := runKubectl(t, "get", "nss", "gpu-node-1")
	for _, want := range []string{"TENANT", "DECISION", "SOURCE", "COMPLETE", "OBSERVED", "acme", "allow", "attested", "true"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get nss lacks %q:\n%s", want, out)
		}
	}
	// The binding's columns read the status the observe controller keeps.
	binding.Status = v1alpha1.TenantBindingStatus{ObservedGeneration: binding.Generation, Pool: "acme", Policy: "acme-strict", PolicyFound: true,
		Namespaces:    []v1alpha1.BindingNamespace{{Name: binding.Spec.Namespaces[0], Exists: true, Policy: "acme-strict"}},
		PoolNodeCount: 3, PoolNodes: []string{"gpu-node-1", "gpu-node-2", "gpu-node-3"},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Resolved", Message: "ok", LastTransitionTime: observed}}}
	if err := k8s.Status().Update(ctx, binding); err != nil {
		t.Fatalf("updating TenantBinding status: %v", err)
	}
	out = runKubectl(t, "get", "gtb", "acme")
	for _, want := range []string{"TENANT", "POOL", "POLICY", "NODES", "READY", "acme-strict", "3", "True"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get gtb lacks %q:\n%s", want, out)
		}
	}
	out = runKubectl(t, "get", "xila-guard")
	for _, want := range []string{"placementpolicy.guard.xila.us/acme-strict", "tenantbinding.guard.xila.us/acme", "nodesecuritystate.guard.xila.us/gpu-node-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get xila-guard lacks %q:\n%s", want, out)
		}
	}
}

// invalidCase is an object the API server must refuse, and the field and
// message it must name.
type invalidCase struct {
	name     string
	manifest string
	field    string
	message  string
}

func TestIntegrationInvalidObjectsRefused(t *testing.T) {
	cases := []invalidCase{
		{"no evidence", `{apiVersion: guard.xila.us/v1alpha1, kind: PlacementPolicy, metadata: {name: p1}, spec: {}}`,
			"spec.evidence", "Required value"},
		{"no accepted source", policyWith(`evidence: {acceptedSources: []}`), "spec.evidence.acceptedSources", "should have at least 1 items"},
		{"unknown source", policyWith(`evidence: {acceptedSources: [rumour]}`), "spec.evidence.acceptedSources[0]", `Unsupported value: "rumour"`},
		{"mock listed", policyWith(`evidence: {acceptedSources: [nfd, mock]}`), "spec.evidence.acceptedSources", "mock cannot be listed"},
		{"source listed twice", policyWith(`evidence: {acceptedSources: [nfd, nfd]}`), "spec.evidence.acceptedSources[1]", `Duplicate value: "nfd"`},
		{"duration does not parse", policyWith(`evidence: {acceptedSources: [nfd], maxAge: soon}`), "spec.evidence.maxAge", "should match"},
		{"duration too short", policyWith(`evidence: {acceptedSources: [nfd], maxAge: 500ms}`), "spec.evidence.maxAge", "must be at least 1s"},
		{"duration overflows", policyWith(`evidence: {acceptedSources: [nfd], maxAge: 9999999999h}`), "spec.evidence.maxAge", "should match"},
		{"unknown confinement", policyWith(`evidence: {acceptedSources: [nfd]}, confinement: Anywhere`), "spec.confinement", `Unsupported value: "Anywhere"`},
		{"unknown sharing mode", policyWith(`evidence: {acceptedSources: [nfd]}, gpuSharing: {forbiddenModes: [Shared]}`),
			"spec.gpuSharing.forbiddenModes[0]", `Unsupported value: "Shared"`},
		{"mode allowed and forbidden", policyWith(`evidence: {acceptedSources: [nfd]}, gpuSharing: {allowedModes: [MIG], forbiddenModes: [MIG, MPS]}`),
			"spec.gpuSharing", "a sharing mode cannot be both allowed and forbidden"},
		{"short measurement", policyWith(`evidence: {acceptedSources: [nfd]}, confidentialComputing: {allowedMeasurements: ["sha256:abc"]}`),
			"spec.confidentialComputing.allowedMeasurements[0]", "should match"},
		{"uppercase measurement", policyWith(`evidence: {acceptedSources: [nfd]}, confidentialComputing: {allowedMeasurements: ["sha256:` + strings.Repeat("A", 64) + `"]}`),
			"spec.confidentialComputing.allowedMeasurements[0]", "should match"},
		{"unknown TEE", policyWith(`evidence: {acceptedSources: [nfd]}, confidentialComputing: {teeTypes: [Enclave9]}`),
			"spec.confidentialComputing.teeTypes[0]", `Unsupported value: "Enclave9"`},
		{"attestation age without attestation", policyWith(`evidence: {acceptedSources: [nfd]}, confidentialComputing: {maxAttestationAge: 1h}`),
			"spec.confidentialComputing", "maxAttestationAge needs requireAttestation: true"},

		{"binding named apart from its tenant", bindingWith("acme", `{tenantId: globex, namespaces: [globex]}`), "<nil>",
			"metadata.name must equal spec.tenantId"},
		{"tenant id not a DNS label", bindingWith("acme-1", `{tenantId: Acme_1, namespaces: [a]}`), "spec.tenantId", "should match"},
		{"binding without namespaces", bindingWith("acme", `{tenantId: acme, namespaces: []}`), "spec.namespaces", "should have at least 1 items"},
		{"namespace not a DNS label", bindingWith("acme", `{tenantId: acme, namespaces: [Acme]}`), "spec.namespaces[0]", "should match"},
		{"empty policy reference", bindingWith("acme", `{tenantId: acme, namespaces: [a], effectivePolicyRef: {name: ""}}`),
			"spec.effectivePolicyRef.name", "should be at least 1 chars long"},

		{"state without node UID", stateWith(`nodeUID: ""`), "spec.nodeUID", "should be at least 1 chars long"},
		{"state time does not parse", stateWith(`observedAt: yesterday`), "spec.observedAt", `must be of type date-time`},
		{"unknown evidence source", stateWith(`source: rumour`), "spec.source", `Unsupported value: "rumour"`},
		{"device listed twice", stateWith(`devices: [{id: g0, sharingMode: MIG}, {id: g0, sharingMode: MIG}]`),
			"spec.devices[1]", `Duplicate value: {"id":"g0"}`},
		{"MIG profile without MIG", stateWith(`devices: [{id: g0, sharingMode: Exclusive, migProfile: 1g.10gb}]`),
			"spec.devices[0]", "migProfile needs mig: true (or sharingMode: MIG)"},
		{"unknown CC mode", stateWith(`devices: [{id: g0, ccMode: Sometimes}]`), "spec.devices[0].ccMode", `Unsupported value: "Sometimes"`},
		{"unknown verdict", stateWith(`tee: {type: TDX, attestation: {verdict: Maybe, verifiedAt: "2026-03-01T12:00:00Z"}}`),
			"spec.tee.attestation.verdict", `Unsupported value: "Maybe"`},
		{"bad TEE measurement", stateWith(`tee: {type: TDX, measurement: "md5:00"}`), "spec.tee.measurement", "should match"},
		{"host data of the wrong size", stateWith(`tee: {type: TDX, hostData: "` + strings.Repeat("0", 64) + `"}`), "spec.tee",
			"hostData is 32 bytes (64 hex digits) of SEV-SNP HOST_DATA or 48 bytes (96 hex digits) of TDX MRCONFIGID"},
		{"SEV-SNP TCB on TDX", stateWith(`tee: {type: TDX, snpTCB: {bootLoader: 1, tee: 0, snp: 1, microcode: 1}}`), "spec.tee", "snpTCB is only for SEV-SNP"},
		{"TDX TCB on SEV-SNP", stateWith(`tee: {type: SEV-SNP, tdxTCBSVN: "` + strings.Repeat("0", 32) + `"}`), "spec.tee", "tdxTCBSVN is only for TDX"},
		{"chip ID on TDX", stateWith(`tee: {type: TDX, chipID: "` + strings.Repeat("0", 128) + `"}`), "spec.tee", "chipID is only for SEV-SNP"},
		{"TCB level out of range", stateWith(`tee: {type: SEV-SNP, snpTCB: {bootLoader: 256, tee: 0, snp: 1, microcode: 1}}`),
			"spec.tee.snpTCB.bootLoader", "should be less than or equal to 255"},
		{"chip ID not hex", stateWith(`tee: {type: SEV-SNP, chipID: "` + strings.Repeat("X", 128) + `"}`), "spec.tee.chipID", "should match"},
		{"reason on a pass", stateWith(`tee: {type: SEV-SNP, attestation: {verdict: Passed, verifiedAt: "2026-03-01T12:00:00Z", reason: QUOTE_INVALID}}`),
			"spec.tee.attestation", "reason is only for a Failed verdict"},
		{"reason not a code", stateWith(`tee: {type: SEV-SNP, attestation: {verdict: Failed, verifiedAt: "2026-03-01T12:00:00Z", reason: "bad quote"}}`),
			"spec.tee.attestation.reason", "should match"},
		{"unknown root of trust", stateWith(`tee: {type: SEV-SNP, attestation: {verdict: Passed, verifiedAt: "2026-03-01T12:00:00Z", rootOfTrust: acme}}`),
			"spec.tee.attestation.rootOfTrust", `Unsupported value: "acme"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(ctx, object(t, tc.manifest))
			if !apierrors.IsInvalid(err) {
				t.Fatalf("Create() error = %v, want Invalid", err)
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Details == nil {
				t.Fatalf("error %v carries no details", err)
			}
			var got []string
			for _, c := range status.Status().Details.Causes {
				got = append(got, c.Field+": "+c.Message)
				if c.Field == tc.field && strings.Contains(c.Message, tc.message) {
					return
				}
			}
			t.Errorf("no cause at %s containing %q; causes:\n%s", tc.field, tc.message, strings.Join(got, "\n"))
		})
	}
}

func TestIntegrationTenantIDImmutable(t *testing.T) {
	b := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: "initech"},
		Spec: v1alpha1.TenantBindingSpec{TenantID: "initech", Namespaces: []string{"initech"}}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Spec.TenantID = "initrode"
	err := k8s.Update(ctx, b)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `spec.tenantId: Invalid value: "initrode": tenantId is immutable`) {
		t.Errorf("Update() error = %v, want tenantId is immutable", err)
	}
}

func TestIntegrationKubectlExplain(t *testing.T) {
	out := runKubectl(t, "explain", "placementpolicy.spec")
	for _, want := range []string{
		"GROUP:      guard.xila.us", "KIND:       PlacementPolicy", "VERSION:    v1alpha1",
		"confinement\t<string>", "enum: Pool, Any", "says where the tenant's pods may run",
		"evidence\t<Object> -required-", "gpuSharing\t<Object>", "confidentialComputing\t<Object>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain placementpolicy.spec lacks %q:\n%s", want, out)
		}
	}
	out = runKubectl(t, "explain", "nodesecuritystate.spec.devices.sharingMode")
	if !strings.Contains(out, "FIELD: sharingMode <string>") || !strings.Contains(out, "TimeSlicing") ||
		!strings.Contains(out, "sharingMode is how the device, or each of its MIG slices, is shared") {
		t.Errorf("kubectl explain of a device's sharingMode:\n%s", out)
	}
}

func policyWith(spec string) string {
	return "{apiVersion: guard.xila.us/v1alpha1, kind: PlacementPolicy, metadata: {name: p1}, spec: {" + spec + "}}"
}

func bindingWith(name, spec string) string {
	return "{apiVersion: guard.xila.us/v1alpha1, kind: TenantBinding, metadata: {name: " + name + "}, spec: " + spec + "}"
}

// stateWith returns a valid NodeSecurityState with one field replaced.
func stateWith(field string) string {
	fields := map[string]string{
		"nodeUID": `nodeUID: uid-1`, "incarnation": `incarnation: boot-1`, "observedAt": `observedAt: "2026-03-01T12:00:00Z"`,
		"source": `source: nfd`, "complete": `complete: true`,
	}
	key, _, _ := strings.Cut(field, ":")
	fields[key] = field
	parts := make([]string, 0, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		parts = append(parts, fields[k])
	}
	return "{apiVersion: guard.xila.us/v1alpha1, kind: NodeSecurityState, metadata: {name: n1}, spec: {" + strings.Join(parts, ", ") + "}}"
}
