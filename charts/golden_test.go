package charts

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/golden")

// goldenCases are the value sets whose render is kept in
// testdata/golden/<name>.yaml: testdata/values/<name>.yaml.
var goldenCases = []string{
	"default",
	"enforcement-only",
	"enforcement",
	"enforcement-lab",
	"enforcement-integrations",
	"integrations-only",
	"tenant-rbac",
	"tenant-rbac-integrations",
	"cert-manager",
	"cert-manager-issuer",
	"generate",
	"network-policy",
	"observe",
	"confidential",
	"confidential-tsm",
	"monitoring",
	"gpu-devices",
	"key-broker",
}

// generatedPEM matches the base64 PEM blobs that TLS mode generate makes
// anew in every render; the golden file keeps a placeholder.
var generatedPEM = regexp.MustCompile(`(?m)^(\s*(?:ca\.crt|tls\.crt|tls\.key|caBundle): )LS0t[A-Za-z0-9+/=]+$`)

// TestGolden renders every case and compares it with its golden file;
// `go test -run TestGolden -update` rewrites them.
func TestGolden(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, loadChart(t), withTestCA(t, readValues(t, name)))
			got := "# helm install " + releaseName + " -n " + releaseNS + " -f testdata/values/" + name + ".yaml\n" +
				r.Manifest + "\n# NOTES.txt\n" + r.Notes + "\n"
			if name == "generate" {
				got = generatedPEM.ReplaceAllString(got, "${1}<generated>")
			}
			path := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v: run go test ./charts -run TestGolden -update", err)
			}
			if string(want) != got {
				t.Errorf("render of %s differs from %s; if the change is intended, run go test ./charts -run TestGolden -update\n%s",
					name, path, lineDiff(string(want), got))
			}
		})
	}
}

// TestGoldenFilesHaveCases fails on golden files that no case writes any
// more, and on value files no case reads.
func TestGoldenFilesHaveCases(t *testing.T) {
	for _, dir := range []string{"golden", "values"} {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".yaml")
			if !slices.Contains(goldenCases, name) {
				if *update && dir == "golden" {
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
					continue
				}
				t.Errorf("stale %s: no case of goldenCases is named %q; delete it or add the case", f, name)
			}
		}
	}
}

// lineDiff lists the first lines that differ, enough to see what changed.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for i := 0; i < max(len(w), len(g)) && len(out) < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			out = append(out, "line "+strconv.Itoa(i+1)+":\n  - "+wl+"\n  + "+gl)
		}
	}
	return strings.Join(out, "\n")
}
