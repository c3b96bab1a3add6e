package admission

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// TestRulesDocumented keeps docs/webhook.md in step with the code: every
// rule and every reason the webhook gives on its own has a row.
func TestRulesDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "webhook.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, r := range guard.AdmissionReasons {
		if !strings.Contains(doc, "`"+string(r)+"`") {
			t.Errorf("docs/webhook.md does not mention %s", r)
		}
	}
	for _, rule := range []string{RuleScheduler, RuleNodeName, RulePrivileged, RuleHostNamespaces, RuleHostPath, RulePodSecurity, RuleImages, RuleForeignPool, RuleTenant,
		RuleEvaluator, RuleMirrorPod, RulePodAddress, RuleRecord, RulePoolToleration, RulePoolSelector, RulePoolNodeName, RuleBinding, RuleNodePool, RuleMigration, RuleClaim, RuleAllocation, RuleRequest, RuleLookup} {
		if !strings.Contains(doc, "| `"+rule+"` |") {
			t.Errorf("docs/webhook.md has no row for rule %s", rule)
		}
	}
}
