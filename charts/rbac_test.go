package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestClusterRolesMatchGenerated keeps each controller's ClusterRole in
// the chart equal to the one controller-gen generates from the RBAC
// markers of its code (components/<name>/config/rbac/role.yaml,
// hack/update-codegen.sh): the chart cannot read files outside its
// directory, so it carries a copy between two marker lines.
func TestClusterRolesMatchGenerated(t *testing.T) {
	for _, c := range []struct{ component, template string }{
		{"observe", "observe-rbac.yaml"},
		{"attest", "attest-rbac.yaml"},
	} {
		t.Run(c.component, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "components", c.component, "config", "rbac", "role.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var generated rbacv1.ClusterRole
			if err := yaml.Unmarshal(data, &generated); err != nil {
				t.Fatalf("role.yaml: %v", err)
			}
			if len(generated.Rules) == 0 {
				t.Fatal("role.yaml has no rules")
			}
			template := filepath.Join("xila-guard", "templates", c.template)
			data, err = os.ReadFile(template)
			if err != nil {
				t.Fatal(err)
			}
			const begin, end = "# BEGIN generated rules\n", "# END generated rules\n"
			text := string(data)
			i, j := strings.Index(text, begin), strings.Index(text, end)
			if i < 0 || j < i {
				t.Fatalf("%s: want the rules between %q and %q", template, strings.TrimSpace(begin), strings.TrimSpace(end))
			}
			var chart []rbacv1.PolicyRule
			if err := yaml.Unmarshal([]byte(text[i+len(begin):j]), &chart); err != nil {
				t.Fatalf("%s: %v", template, err)
			}
			if diff := cmp.Diff(generated.Rules, chart); diff != "" {
				t.Errorf("%s differs from components/%s/config/rbac/role.yaml; copy the generated rules (-generated +chart):\n%s", template, c.component, diff)
			}
		})
	}
}
