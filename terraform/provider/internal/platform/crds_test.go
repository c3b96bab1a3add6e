package platform

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The repository's CRDs, which the module passes as crds_dir.
const repoCRDs = "../../../../components/api/config/crd"

func TestLoadCRDsOfTheRepository(t *testing.T) {
	crds, err := LoadCRDs(repoCRDs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gpuclasses.gpu.guard.xila.us", "gpudevices.gpu.guard.xila.us", "gpusettings.gpu.guard.xila.us",
		"keyreleasepolicies.guard.xila.us", "nodesecuritystates.guard.xila.us", "placementpolicies.guard.xila.us", "policyparametersets.guard.xila.us",
		"tenantbindings.guard.xila.us"}
	if got := crds.Names(); !slices.Equal(got, want) {
		t.Errorf("CRDs = %v, want %v", got, want)
	}
	if len(crds.Digest) != 64 {
		t.Errorf("digest %q is not a SHA-256", crds.Digest)
	}
}

func TestLoadCRDs(t *testing.T) {
	crd := func(name string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + name + "\n"
	}
	tests := []struct {
		name    string
		files   map[string]string
		want    []string
		wantErr string
	}{
		{name: "two files, two documents in one", files: map[string]string{
			"a.yaml": crd("as.x.io") + "---\n" + crd("bs.x.io"), "b.yaml": crd("cs.x.io"), "README.md": "not read",
		}, want: []string{"as.x.io", "bs.x.io", "cs.x.io"}},
		{name: "empty directory", files: map[string]string{}, wantErr: "has no CustomResourceDefinition"},
		{name: "another kind", files: map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"},
			wantErr: `a.yaml: want apiextensions.k8s.io/v1 CustomResourceDefinition objects with a name, found apiVersion "v1" kind "ConfigMap" name "x"`},
		{name: "not YAML", files: map[string]string{"a.yaml": "a: ["}, wantErr: "a.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			crds, err := LoadCRDs(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := crds.Names(); !slices.Equal(got, tc.want) {
				t.Errorf("CRDs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLoadCRDsMissingDirectory(t *testing.T) {
	if _, err := LoadCRDs(filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "reading the CRD directory") {
		t.Fatalf("error %v, want it to say the directory cannot be read", err)
	}
}

func TestCRDsDigestFollowsTheFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: as.x.io\n")
	a, err := LoadCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	write("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: as.x.io\nspec: {group: x.io}\n")
	b, err := LoadCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest == b.Digest {
		t.Error("digest unchanged after the CRD file changed")
	}
}
