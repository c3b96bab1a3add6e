package guard

import (
	"regexp"
	"slices"
	"testing"
)

func TestPolicyReasons(t *testing.T) {
	upperSnake := regexp.MustCompile(`^[A-Z]+(_[A-Z]+)*$`)
	for i, r := range PolicyReasons {
		if !upperSnake.MatchString(string(r)) {
			t.Errorf("%q is not UPPER_SNAKE", r)
		}
		for name, others := range map[string][]Reason{"evaluator": Reasons, "caller": CallerReasons,
			"admission": AdmissionReasons, "attestation": AttestationReasons, "key release": KeyReasons} {
			if slices.Contains(others, r) {
				t.Errorf("%s is also a %s reason", r, name)
			}
		}
		if slices.Contains(PolicyReasons[:i], r) {
			t.Errorf("%s is listed twice", r)
		}
	}
}

// TestPolicyReasonsDocumented keeps the admission policies' table in
// docs/api.md in step with the codes.
func TestPolicyReasonsDocumented(t *testing.T) {
	assertTableRows(t, "Admission policy reason codes", "admission policy", PolicyReasons)
}
