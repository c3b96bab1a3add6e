package charts

import (
	"os"
	"path/filepath"
	"slices"
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
	for _, c := range []struct {
		component, template string
		// role is the directory of the generated role.yaml under
		// config/; rbac when empty.
		role string
		// namespaced are the resources the chart grants in the release
		// namespace only (a Role, between the "namespaced" markers).
		namespaced []string
	}{
		{"observe", "observe-rbac.yaml", "", nil},
		{"attest", "attest-rbac.yaml", "", nil},
		{"attest", "key-broker.yaml", "kbs-rbac", nil},
		{"attest", "tee-resources.yaml", "teeresources-rbac", nil},
		{"gpudevices", "gpudevices.yaml", "", []string{"configmaps", "gpusettings"}},
	} {
		if c.role == "" {
			c.role = "rbac"
		}
		t.Run(c.component+"/"+c.role, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "components", c.component, "config", c.role, "role.yaml"))
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
			var cluster, namespaced []rbacv1.PolicyRule
			for _, r := range generated.Rules {
				if slices.ContainsFunc(r.Resources, func(res string) bool { return slices.Contains(c.namespaced, res) }) {
					namespaced = append(namespaced, r)
				} else {
					cluster = append(cluster, r)
				}
			}
			text := string(data)
			for _, part := range []struct {
				marker string
				want   []rbacv1.PolicyRule
			}{{"generated rules", cluster}, {"generated namespaced rules", namespaced}} {
				begin, end := "# BEGIN "+part.marker+"\n", "# END "+part.marker+"\n"
				i, j := strings.Index(text, begin), strings.Index(text, end)
				if part.want == nil && i < 0 {
					continue
				}
				if i < 0 || j < i {
					t.Fatalf("%s: want the rules between %q and %q", template, strings.TrimSpace(begin), strings.TrimSpace(end))
				}
				var chart []rbacv1.PolicyRule
				if err := yaml.Unmarshal([]byte(text[i+len(begin):j]), &chart); err != nil {
					t.Fatalf("%s: %v", template, err)
				}
				if diff := cmp.Diff(part.want, chart); diff != "" {
					t.Errorf("%s (%s) differs from components/%s/config/%s/role.yaml; copy the generated rules (-generated +chart):\n%s", template, part.marker, c.component, c.role, diff)
				}
			}
		})
	}
}
