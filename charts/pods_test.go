package charts

import (
	"strings"
	"testing"
)

// TestPodSettings: pods.* and each component's affinity reach every pod
// template the chart renders, the agent keeps its own PriorityClass, and
// the selector labels cannot be overridden.
func TestPodSettings(t *testing.T) {
	vals := monitoredValues()
	vals["pods"] = map[string]any{
		"imagePullSecrets":  []any{map[string]any{"name": "registry-credentials"}},
		"labels":            map[string]any{"team": "platform"},
		"annotations":       map[string]any{"example.com/owner": "platform"},
		"priorityClassName": "platform-critical",
	}
	affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "platform", "operator": "Exists"}}}}}}}
	for _, path := range [][]string{{"enforcement", "core"}, {"enforcement", "scheduler"}, {"webhook"}, {"observe"}, {"networkPolicy"},
		{"confidential", "controller"}, {"confidential", "attester"}} {
		m := vals
		for _, k := range path {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m["affinity"] = affinity
	}
	objs := objects(t, mustRender(t, loadChart(t), vals).Manifest)
	seen := 0
	for _, o := range objs {
		if o.Kind != "Deployment" && o.Kind != "DaemonSet" {
			continue
		}
		seen++
		tmpl := field(o.raw, "spec", "template")
		if field(tmpl, "metadata", "labels", "team") != "platform" || field(tmpl, "metadata", "annotations", "example.com/owner") != "platform" {
			t.Errorf("%s: pod labels %v, annotations %v", o, field(tmpl, "metadata", "labels"), field(tmpl, "metadata", "annotations"))
		}
		if field(tmpl, "spec", "imagePullSecrets", 0, "name") != "registry-credentials" {
			t.Errorf("%s: imagePullSecrets %v", o, field(tmpl, "spec", "imagePullSecrets"))
		}
		wantClass := "platform-critical"
		if o.name() == "xila-guard-agent" {
			wantClass = "system-node-critical"
		}
		if got := field(tmpl, "spec", "priorityClassName"); got != wantClass {
			t.Errorf("%s: priorityClassName %v, want %s", o, got, wantClass)
		}
		if field(tmpl, "spec", "affinity", "nodeAffinity") == nil {
			t.Errorf("%s: no affinity", o)
		}
		if o.name() == "xila-guard-scheduler" && field(tmpl, "metadata", "annotations", "checksum/config") == nil {
			t.Errorf("%s lost its config checksum", o)
		}
	}
	if seen != 7 {
		t.Errorf("%d Deployments and DaemonSets rendered, want 7", seen)
	}
	vals["pods"] = map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "mine"}}
	if _, err := render(loadChart(t), vals); err == nil || !strings.Contains(err.Error(), "pods.labels cannot set app.kubernetes.io/name") {
		t.Errorf("a selector label in pods.labels: %v", err)
	}
}
