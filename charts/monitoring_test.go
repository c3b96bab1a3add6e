package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// monitoredValues turn on every component and every monitoring part.
func monitoredValues() map[string]any {
	return map[string]any{
		"enforcement":       map[string]any{"enabled": true, "core": map[string]any{"enabled": true}},
		"webhook":           map[string]any{"enabled": true},
		"observe":           map[string]any{"enabled": true},
		"networkPolicy":     map[string]any{"enabled": true},
		"gpuDevicePolicies": map[string]any{"enabled": true},
		"confidential": map[string]any{"enabled": true, "keyBroker": map[string]any{"enabled": true}, "attester": map[string]any{"backend": "lab",
			"lab": map[string]any{"measurement": "sha384:" + strings.Repeat("a", 96)}}},
		"monitoring": map[string]any{
			"podMonitors":      map[string]any{"enabled": true},
			"prometheusRules":  map[string]any{"enabled": true},
			"grafanaDashboard": map[string]any{"enabled": true},
		},
	}
}

// documentedMetrics are the metric names the docs list in backticks: the
// operator's contract, which alerts and dashboards may rely on.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("reading docs: %v", err)
	}
	names := map[string]bool{"up": true}
	re := regexp.MustCompile("`(xila_guard_[a-z_]+)")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
	}
	return names
}

// checkExpr parses a PromQL expression and checks that every metric it
// selects is documented (a histogram's _bucket, _count and _sum series
// under the histogram's name).
func checkExpr(t *testing.T, what, expr string, documented map[string]bool) {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", what, expr, err)
		return
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && documented[base] {
				name = base
			}
		}
		if !documented[name] {
			t.Errorf("%s: metric %s is in no docs/*.md metrics table", what, vs.Name)
		}
		return nil
	})
}

// TestPrometheusRules lints the rendered PrometheusRule as promtool would
// (Prometheus's own rule file parser and validation, every expression
// parsed) and checks that each alert selects documented metrics.
func TestPrometheusRules(t *testing.T) {
	objs := objects(t, mustRender(t, loadChart(t), monitoredValues()).Manifest)
	rule := find(t, objs, "PrometheusRule", "xila-guard")
	spec, err := yaml.Marshal(field(rule.raw, "spec"))
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation)
	for _, err := range errs {
		t.Errorf("rule file: %v", err)
	}
	if groups == nil {
		t.Fatal("no rule groups")
	}
	documented := documentedMetrics(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("group %s: rule %q needs an alert name, a severity, a summary and a description", g.Name, r.Alert)
			}
			checkExpr(t, "alert "+r.Alert, r.Expr, documented)
			alerts = append(alerts, r.Alert)
		}
	}
	for _, want := range []string{"XilaGuardWebhookUnavailable", "XilaGuardWebhookSlow", "XilaGuardEvaluatorErrors",
		"XilaGuardEvidenceStale", "XilaGuardDrift", "XilaGuardAgentDenyAll", "XilaGuardAttestationFailures", "XilaGuardAttestedEvidenceOld"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alert %s is missing; have %v", want, alerts)
		}
	}
}

// TestGrafanaDashboard checks the dashboard ConfigMap: valid JSON, every
// panel's query parses and selects documented metrics.
func TestGrafanaDashboard(t *testing.T) {
	objs := objects(t, mustRender(t, loadChart(t), monitoredValues()).Manifest)
	cm := find(t, objs, "ConfigMap", "xila-guard-dashboard")
	if field(cm.raw, "metadata", "labels", "grafana_dashboard") != "1" {
		t.Error("the dashboard lacks the sidecar label")
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	data, _ := field(cm.raw, "data", "xila-guard.json").(string)
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	documented := documentedMetrics(t)
	for _, panel := range d.Panels {
		if len(panel.Targets) == 0 {
			t.Errorf("panel %q has no query", panel.Title)
		}
		for _, target := range panel.Targets {
			checkExpr(t, "panel "+panel.Title, target.Expr, documented)
		}
	}
}

// TestPodMonitors: one per component the release runs and none when off;
// the scheduler's /metrics is opened only while they are on.
func TestPodMonitors(t *testing.T) {
	objs := objects(t, mustRender(t, loadChart(t), monitoredValues()).Manifest)
	var monitors []string
	for _, o := range objs {
		if o.Kind == "PodMonitor" {
			monitors = append(monitors, o.name())
			sel, _ := field(o.raw, "spec", "selector", "matchLabels", "app.kubernetes.io/name").(string)
			if sel != o.name() {
				t.Errorf("PodMonitor %s selects %q", o.name(), sel)
			}
		}
	}
	slices.Sort(monitors)
	want := []string{"xila-guard-agent", "xila-guard-attest", "xila-guard-core", "xila-guard-gpudevices", "xila-guard-kbs", "xila-guard-observe", "xila-guard-scheduler", "xila-guard-webhook"}
	if !slices.Equal(monitors, want) {
		t.Errorf("PodMonitors %v, want %v", monitors, want)
	}
	schedulerArgs := func(objs []object) string {
		args, _ := json.Marshal(field(find(t, objs, "Deployment", "xila-guard-scheduler").raw, "spec", "template", "spec", "containers", 0, "args"))
		return string(args)
	}
	if !strings.Contains(schedulerArgs(objs), "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics") {
		t.Error("the scheduler does not serve /metrics to the PodMonitor")
	}
	off := monitoredValues()
	off["monitoring"] = map[string]any{}
	objs = objects(t, mustRender(t, loadChart(t), off).Manifest)
	for _, o := range objs {
		if o.Kind == "PodMonitor" || o.Kind == "PrometheusRule" || o.name() == "xila-guard-dashboard" {
			t.Errorf("%s rendered with monitoring off", o)
		}
	}
	if strings.Contains(schedulerArgs(objs), "authorization-always-allow-paths") {
		t.Error("the scheduler serves /metrics without authorization while monitoring is off")
	}
}
