package guard

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "### Key release reason codes")
	if start < 0 {
		t.Fatal("docs/api.md has no section \"Key release reason codes\"")
	}
	section := doc[start+1:]
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	for _, r := range KeyReasons {
		if !strings.Contains(section, "| `"+string(r)+"` |") {
			t.Errorf("docs/api.md has no key release row for %s", r)
		}
	}
}
