package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/verify"
)

func TestParseReferenceValues(t *testing.T) {
	m := "sha384:" + strings.Repeat("ab", 48)
	refs, err := ParseReferenceValues([]byte(`
measurements:
- {tee: SEV-SNP, measurement: "` + m + `", hostData: "` + strings.Repeat("42", 32) + `", notAfter: "2027-01-01T00:00:00Z"}
- {tee: TDX, measurement: "` + m + `", hostData: "` + strings.Repeat("01", 48) + `"}
minSNPTCB: {bootLoader: 3, tee: 0, snp: 8, microcode: 115}
minTDXTCBSVN: "` + strings.Repeat("02", 16) + `"
`))
	if err != nil {
		t.Fatal(err)
	}
	hd := func(b byte, n int) []byte { return []byte(strings.Repeat(string(rune(b)), n)) }
	want := verify.References{
		Measurements: []verify.Reference{
			{TEE: v1alpha1.TEESEVSNP, Measurement: v1alpha1.Measurement(m), HostData: hd(0x42, 32), NotAfter: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
			{TEE: v1alpha1.TEETDX, Measurement: v1alpha1.Measurement(m), HostData: hd(0x01, 48)},
		},
		MinSNPTCB:    evidence.SNPTCB{BootLoader: 3, SNP: 8, Microcode: 115},
		MinTDXTCBSVN: hd(0x02, 16),
	}
	if diff := cmp.Diff(want, refs, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("references (-want +got):\n%s", diff)
	}

	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", `{measurements: [], allowAll: true}`, `unknown field "allowAll"`},
		{"duplicate field", "measurements: []\nmeasurements: []", "already set"},
		{"unknown TEE", `{measurements: [{tee: SGX, measurement: "` + m + `"}]}`, `measurements[0]: tee "SGX"`},
		{"sha256 measurement", `{measurements: [{tee: SEV-SNP, measurement: "sha256:` + strings.Repeat("a", 64) + `"}]}`, "is not sha384"},
		{"uppercase measurement", `{measurements: [{tee: SEV-SNP, measurement: "sha384:` + strings.Repeat("A", 96) + `"}]}`, "is not sha384"},
		{"host data of TDX on SEV-SNP", `{measurements: [{tee: SEV-SNP, measurement: "` + m + `", hostData: "` + strings.Repeat("01", 48) + `"}]}`, "not 64 hex digits"},
		{"TCB level", `{minSNPTCB: {bootLoader: 256, tee: 0, snp: 0, microcode: -1}}`, "minSNPTCB.bootLoader is 256, want 0 to 255\nminSNPTCB.microcode is -1"},
		{"TDX TCB size", `{minTDXTCBSVN: "0102"}`, "not 32 hex digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseReferenceValues([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReferenceFileFollowsChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refs.yaml")
	write := func(doc string, mtime time.Time) {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	f := &ReferenceFile{Path: path}
	if _, err := f.References(); err == nil {
		t.Error("no error for a missing file")
	}
	m := "sha384:" + strings.Repeat("ab", 48)
	base := time.Now().Add(-time.Hour)
	write(`{measurements: [{tee: SEV-SNP, measurement: "`+m+`"}]}`, base)
	refs, err := f.References()
	if err != nil || len(refs.Measurements) != 1 {
		t.Fatalf("references %+v, %v", refs, err)
	}
	write(`{measurements: [{tee: SEV-SNP, measurement: "`+m+`"}, {tee: TDX, measurement: "`+m+`"}]}`, base.Add(time.Second))
	if refs, err := f.References(); err != nil || len(refs.Measurements) != 2 {
		t.Errorf("after a change: %+v, %v", refs, err)
	}
	write(`{measurements: [{tee: SEV-SNP, measurement: "sha384:short"}]}`, base.Add(2*time.Second))
	if _, err := f.References(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a broken file: %v, want an error naming it", err)
	}
}
