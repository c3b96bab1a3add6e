package v1alpha1

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// schemaOf reads a generated CRD and returns its v1alpha1 schema.
func schemaOf(t *testing.T, plural string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "config", "crd", "guard.xila.us_"+plural+".yaml"))
	if err != nil {
		t.Fatalf("reading the generated CRD (run hack/update-codegen.sh): %v", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	return *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

func at(s apiextensionsv1.JSONSchemaProps, path ...string) apiextensionsv1.JSONSchemaProps {
	for _, p := range path {
		if p == "[]" {
			s = *s.Items.Schema
			continue
		}
		s = s.Properties[p]
	}
	return s
}

func enum(s apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, v := range s.Enum {
		out = append(out, string(v.Raw[1:len(v.Raw)-1]))
	}
	return out
}

func strs[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// TestCRDsMatchGo keeps the markers, which produce the CRDs, in step with
// the Go constants that the evaluator and the Go validation use.
func TestCRDsMatchGo(t *testing.T) {
	policy := schemaOf(t, "placementpolicies")
	state := schemaOf(t, "nodesecuritystates")
	spec := at(policy, "spec")

	maxAge := at(spec, "evidence", "maxAge")
	if maxAge.Pattern != DurationPattern || at(spec, "confidentialComputing", "maxAttestationAge").Pattern != DurationPattern {
		t.Errorf("duration pattern in the CRD %q, in Go %q", maxAge.Pattern, DurationPattern)
	}
	if d, err := time.ParseDuration(string(maxAge.Default.Raw[1 : len(maxAge.Default.Raw)-1])); err != nil || d != DefaultMaxEvidenceAge {
		t.Errorf("maxAge default %s in the CRD, %s in Go", maxAge.Default.Raw, DefaultMaxEvidenceAge)
	}
	if got := at(spec, "confidentialComputing", "allowedMeasurements", "[]").Pattern; got != MeasurementPattern {
		t.Errorf("measurement pattern in the CRD %q, in Go %q", got, MeasurementPattern)
	}
	if got := at(state, "spec", "tee", "measurement").Pattern; got != MeasurementPattern {
		t.Errorf("evidence measurement pattern in the CRD %q, in Go %q", got, MeasurementPattern)
	}
	cc := at(spec, "confidentialComputing")
	tee := at(state, "spec", "tee")
	for name, pair := range map[string][2]string{
		"reference measurement": {at(cc, "referenceValues", "[]", "measurement").Pattern, MeasurementPattern},
		"reference host data":   {at(cc, "referenceValues", "[]", "hostData").Pattern, HostDataPattern},
		"minimum TDX TCB":       {at(cc, "minTDXTCBSVN").Pattern, TDXTCBSVNPattern},
		"image digest":          {at(cc, "allowedImageDigests", "[]").Pattern, ImageDigestPattern},
		"host data":             {at(tee, "hostData").Pattern, HostDataPattern},
		"TDX TCB":               {at(tee, "tdxTCBSVN").Pattern, TDXTCBSVNPattern},
		"chip ID":               {at(tee, "chipID").Pattern, ChipIDPattern},
		"reason":                {at(tee, "attestation", "reason").Pattern, ReasonPattern},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s pattern in the CRD %q, in Go %q", name, pair[0], pair[1])
		}
	}
	for name, pair := range map[string][2][]string{
		"roots of trust": {enum(at(tee, "attestation", "rootOfTrust")), strs(RootsOfTrust)},
		"sharing modes":  {enum(at(spec, "gpuSharing", "allowedModes", "[]")), strs(GPUSharingModes)},
		"device modes":   {enum(at(state, "spec", "devices", "[]", "sharingMode")), strs(GPUSharingModes)},
		"CC modes":       {enum(at(state, "spec", "devices", "[]", "ccMode")), strs(GPUCCModes)},
		"TEE types":      {enum(at(spec, "confidentialComputing", "teeTypes", "[]")), strs(TEETypes)},
		"sources":        {enum(at(state, "spec", "source")), {"attested", "nfd", "mock"}},
		"confinement":    {enum(at(spec, "confinement")), {string(ConfinementPool), string(ConfinementAny)}},
	} {
		if !slices.Equal(pair[0], pair[1]) {
			t.Errorf("%s: CRD enum %v, Go %v", name, pair[0], pair[1])
		}
	}
}
