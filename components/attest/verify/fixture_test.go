package verify

import (
	"flag"
	"os"
	"testing"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// labEvidenceFile is a report signed with the lab chain of
// ../testdata/labchain, as labReport asks. FuzzVerifySNP seeds with it: a
// fuzz worker runs the setup again, and a report signed there would carry
// another signature than the coordinator's seed. Regenerate it, after the
// chains, with
//
//	go test ./verify -run TestFixture -update-fixture
const labEvidenceFile = "../testdata/labchain/lab-evidence.bin"

var updateFixture = flag.Bool("update-fixture", false, "regenerate "+labEvidenceFile)

func TestFixture(t *testing.T) {
	if *updateFixture {
		lab, _ := chains(t)
		if err := os.WriteFile(labEvidenceFile, sign(t, lab, labReport()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := labVerifier(t).Verify(snpRequest(labEvidence(t), guard.ProfileLab)); err != nil {
		t.Fatalf("%s does not verify: %v", labEvidenceFile, err)
	}
}

func labEvidence(t testing.TB) []byte {
	t.Helper()
	ev, err := os.ReadFile(labEvidenceFile)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
