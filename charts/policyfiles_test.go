package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// allPolicyValues are values that render every admission policy, under
// another release name, pool label and set of principals than the
// chart's defaults.
func allPolicyValues(t *testing.T, release string) map[string]any {
	vals := withTestCA(t, readValues(t, "enforcement-integrations"))
	vals["gpuDevicePolicies"] = readValues(t, "gpu-devices")["gpuDevicePolicies"]
	vals["fullnameOverride"] = release
	return vals
}

// TestAdmissionPoliciesArePlainFiles: every admission policy the chart
// renders is one of the plain files of policies/, unchanged but for its
// name and labels, whatever the release's name, pool label and
// principals: nothing of an installation is spliced into the policies'
// CEL; it reaches them only as parameters.
func TestAdmissionPoliciesArePlainFiles(t *testing.T) {
	files, err := filepath.Glob("xila-guard/policies/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no policy files: %v", err)
	}
	plain := map[string]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "{{") {
			t.Errorf("%s holds a template action: the policies are plain files", f)
		}
		var p map[string]any
		if err := yaml.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if got := field(p, "metadata", "name"); got != name {
			t.Errorf("%s names the policy %v, want %s", f, got, name)
		}
		plain[name] = p
	}
	other := allPolicyValues(t, "guard")
	other["enforcement"] = map[string]any{"scheduler": map[string]any{"poolLabel": "example.com/pool"}}
	other["trustBoundaries"] = map[string]any{"administrators": map[string]any{"users": []any{"alice"}, "groups": []any{"platform"}},
		"poolAdmins": map[string]any{"users": []any{"bob"}}}
	for _, vals := range []map[string]any{allPolicyValues(t, "xila-guard"), other} {
		release := vals["fullnameOverride"].(string)
		seen := map[string]bool{}
		for _, o := range objects(t, mustRender(t, loadChart(t), vals).Manifest) {
			if o.Kind != "ValidatingAdmissionPolicy" {
				continue
			}
			name := strings.TrimPrefix(o.name(), release+"-")
			want, ok := plain[name]
			if !ok {
				t.Errorf("release %s renders the policy %s, which no file of policies/ holds", release, o.name())
				continue
			}
			seen[name] = true
			if !sameJSON(t, o.raw["spec"], want["spec"]) {
				t.Errorf("release %s renders %s with another spec than policies/%s.yaml", release, o.name(), name)
			}
		}
		for name := range plain {
			if !seen[name] {
				t.Errorf("release %s does not render policies/%s.yaml", release, name)
			}
		}
	}
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(j, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
