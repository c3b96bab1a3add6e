package charts

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestChartCarriesTheCRDs checks that the chart ships the guard kinds in
// crds/, byte for byte as generated, so that one helm install brings
// them. (make verify fails when the generated files themselves are stale.)
func TestChartCarriesTheCRDs(t *testing.T) {
	ch := loadChart(t)
	var got []string
	for _, f := range ch.CRDObjects() {
		got = append(got, f.Name)
		want, err := os.ReadFile(filepath.Join("..", "components", "api", "config", "crd", filepath.Base(f.Filename)))
		if err != nil {
			t.Fatalf("chart CRD %s has no generated original: %v", f.Filename, err)
		}
		if string(want) != string(f.File.Data) {
			t.Errorf("chart CRD %s differs from the generated one: run make generate", f.Filename)
		}
	}
	slices.Sort(got)
	want := []string{"crds/gpu.guard.xila.us_gpuclasses.yaml", "crds/gpu.guard.xila.us_gpudevices.yaml", "crds/gpu.guard.xila.us_gpusettings.yaml",
		"crds/guard.xila.us_keyreleasepolicies.yaml", "crds/guard.xila.us_nodesecuritystates.yaml", "crds/guard.xila.us_placementpolicies.yaml",
		"crds/guard.xila.us_policyparametersets.yaml", "crds/guard.xila.us_tenantbindings.yaml"}
	if !slices.Equal(got, want) {
		t.Fatalf("chart CRDs %v, want %v", got, want)
	}
}
