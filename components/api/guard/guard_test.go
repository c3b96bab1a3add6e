package guard

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestStricter(t *testing.T) {
	cases := []struct{ a, b, want Profile }{
		{ProfileLab, ProfileLab, ProfileLab},
		{ProfileLab, ProfileProduction, ProfileProduction},
		{ProfileProduction, ProfileLab, ProfileProduction},
		{ProfileProduction, ProfileProduction, ProfileProduction},
	}
	for _, tc := range cases {
		if got := tc.a.Stricter(tc.b); got != tc.want {
			t.Errorf("%s.Stricter(%s) = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestValidity(t *testing.T) {
	for _, d := range Decisions {
		if !d.IsValid() {
			t.Errorf("%q is not valid", d)
		}
	}
	for _, d := range []Decision{"", "Allow", "ALLOW", "permit"} {
		if d.IsValid() {
			t.Errorf("%q is valid", d)
		}
	}
	for _, p := range Profiles {
		if !p.IsValid() {
			t.Errorf("%q is not valid", p)
		}
	}
	if Profile("staging").IsValid() || Profile("").IsValid() {
		t.Error("an unknown profile is valid")
	}
}

func TestReasons(t *testing.T) {
	upperSnake := regexp.MustCompile(`^[A-Z]+(_[A-Z]+)*$`)
	seen := map[Reason]bool{}
	for _, r := range Reasons {
		if !upperSnake.MatchString(string(r)) {
			t.Errorf("%q is not UPPER_SNAKE", r)
		}
		if seen[r] {
			t.Errorf("%s is listed twice", r)
		}
		seen[r] = true
		if !r.IsKnown() {
			t.Errorf("%s is not known", r)
		}
	}
	if Reason("SOMETHING_ELSE").IsKnown() {
		t.Error("an unlisted reason is known")
	}
}

// TestReasonsDocumented keeps the operator documentation in step with the
// codes: every reason must have a row in docs/api.md.
func TestReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Reasons {
		if !strings.Contains(string(doc), "| `"+string(r)+"` |") {
			t.Errorf("docs/api.md has no row for %s", r)
		}
	}
}
