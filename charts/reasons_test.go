package charts

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// TestPolicyReasonsDeclared renders the chart with every test values file
// and fails on a reason code an admission policy gives (the code its
// message starts with) that components/api/guard does not declare, and
// on a declared policy code no policy gives any more.
func TestPolicyReasonsDeclared(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test values files: %v", err)
	}
	code := regexp.MustCompile(`^'([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+): `)
	given := map[guard.Reason]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		for pname, p := range renderedPolicies(t, withTestCA(t, readValues(t, name))) {
			for i, v := range p.Spec.Validations {
				m := code.FindStringSubmatch(v.MessageExpression)
				if m == nil {
					t.Errorf("values %s: policy %s, validation %d: the message does not start with a reason code: %.80s", name, pname, i, v.MessageExpression)
					continue
				}
				r := guard.Reason(m[1])
				given[r] = true
				if !slices.Contains(guard.PolicyReasons, r) && !slices.Contains(guard.AdmissionReasons, r) {
					t.Errorf("values %s: policy %s gives %s, which components/api/guard does not declare", name, pname, r)
				}
			}
		}
	}
	for _, r := range guard.PolicyReasons {
		if !given[r] {
			t.Errorf("%s is declared as a policy reason, but no policy of any test values file gives it", r)
		}
	}
	// The templates name no code the renders above missed.
	templates, err := filepath.Glob(filepath.Join(chartDir, "templates", "*.*"))
	if err != nil {
		t.Fatal(err)
	}
	literal := regexp.MustCompile(`'([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+): `)
	for _, path := range templates {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllStringSubmatch(string(b), -1) {
			if r := guard.Reason(m[1]); !given[r] {
				t.Errorf("%s names %s, which no render of a test values file gives", filepath.Base(path), r)
			}
		}
	}
}
