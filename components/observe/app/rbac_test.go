package app

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestChartClusterRoleMatchesGenerated keeps the chart's ClusterRole equal
// to the one controller-gen generates from the RBAC markers of run.go: the
// chart cannot read files outside its directory, so it carries a copy.
func TestChartClusterRoleMatchesGenerated(t *testing.T) {
	data, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var generated rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &generated); err != nil {
		t.Fatalf("config/rbac/role.yaml: %v", err)
	}
	const template = "../../../charts/xila-guard/templates/observe-rbac.yaml"
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
	if len(generated.Rules) == 0 {
		t.Fatal("config/rbac/role.yaml has no rules")
	}
	if diff := cmp.Diff(generated.Rules, chart); diff != "" {
		t.Errorf("%s differs from config/rbac/role.yaml; copy the generated rules (-generated +chart):\n%s", template, diff)
	}
}
