package guard

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestAttestationReasons(t *testing.T) {
	upperSnake := regexp.MustCompile(`^[A-Z]+(_[A-Z]+)*$`)
	shared := []Reason{ReasonMeasurementNotAllowed, ReasonMeasurementExpired, ReasonTCBOutOfDate, ReasonAttestationStale}
	for i, r := range AttestationReasons {
		if !upperSnake.MatchString(string(r)) {
			t.Errorf("%q is not UPPER_SNAKE", r)
		}
		if slices.Contains(Reasons, r) != slices.Contains(shared, r) {
			t.Errorf("%s: only %v may also be evaluator reasons", r, shared)
		}
		if slices.Contains(CallerReasons, r) || slices.Contains(AdmissionReasons, r) {
			t.Errorf("%s is also a caller or admission reason", r)
		}
		if slices.Contains(AttestationReasons[:i], r) {
			t.Errorf("%s is listed twice", r)
		}
	}
	for _, r := range shared {
		if !slices.Contains(AttestationReasons, r) {
			t.Errorf("%s is missing", r)
		}
	}
}

// TestAttestationReasonsDocumented keeps the verifier's table in
// docs/api.md in step with the codes.
func TestAttestationReasonsDocumented(t *testing.T) {
	assertTableRows(t, "Attestation reason codes", "attestation", AttestationReasons)
}

// assertTableRows checks that the section of docs/api.md under heading has
// a table row for every reason; what names the table in messages.
func assertTableRows(t *testing.T, heading, what string, reasons []Reason) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "### "+heading)
	if start < 0 {
		t.Fatalf("docs/api.md has no section %q", heading)
	}
	section := doc[start+1:]
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	for _, r := range reasons {
		if !strings.Contains(section, "| `"+string(r)+"` |") {
			t.Errorf("docs/api.md has no %s row for %s", what, r)
		}
	}
}
