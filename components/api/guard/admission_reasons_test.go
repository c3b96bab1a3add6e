package guard

import (
	"regexp"
	"slices"
	"testing"
)

func TestAdmissionReasons(t *testing.T) {
	upperSnake := regexp.MustCompile(`^[A-Z]+(_[A-Z]+)*$`)
	for i, r := range AdmissionReasons {
		if !upperSnake.MatchString(string(r)) {
			t.Errorf("%q is not UPPER_SNAKE", r)
		}
		if slices.Contains(Reasons, r) {
			t.Errorf("%s is also an evaluator reason", r)
		}
		if slices.Contains(CallerReasons, r) {
			t.Errorf("%s is also a caller reason", r)
		}
		if slices.Contains(AdmissionReasons[:i], r) {
			t.Errorf("%s is listed twice", r)
		}
	}
}
