package guard

import (
	"regexp"
	"slices"
	"testing"
)

func TestKeyReasons(t *testing.T) {
	upperSnake := regexp.MustCompile(`^[A-Z]+(_[A-Z]+)*$`)
	for i, r := range KeyReasons {
		if !upperSnake.MatchString(string(r)) {
			t.Errorf("%q is not UPPER_SNAKE", r)
		}
		for name, others := range map[string][]Reason{"evaluator": Reasons, "caller": CallerReasons,
			"admission": AdmissionReasons, "attestation": AttestationReasons} {
			if slices.Contains(others, r) {
				t.Errorf("%s is also an %s reason", r, name)
			}
		}
		if slices.Contains(KeyReasons[:i], r) {
			t.Errorf("%s is listed twice", r)
		}
	}
}

// TestKeyReasonsDocumented keeps the key broker's table in docs/api.md in
// step with the codes.
func TestKeyReasonsDocumented(t *testing.T) {
	assertTableRows(t, "Key release reason codes", "key release", KeyReasons)
}
