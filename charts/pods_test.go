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
	spread := []any{map[string]any{"maxSkew": int64(1), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/part-of": "xila-guard"}}}}
	for _, path := range [][]string{{"enforcement", "core"}, {"enforcement", "scheduler"}, {"webhook"}, {"observe"}, {"networkPolicy"},
		{"confidential", "controller"}, {"confidential", "attester"}, {"confidential", "keyBroker"}, {"gpuDevicePolicies", "controller"}} {
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
		if path[len(path)-1] != "networkPolicy" && path[len(path)-1] != "attester" { // DaemonSets
			m["topologySpreadConstraints"] = spread
		}
	}
	vals["confidential"].(map[string]any)["keyBroker"].(map[string]any)["enabled"] = true
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
		if got := field(tmpl, "spec", "topologySpreadConstraints", 0, "topologyKey"); (o.Kind == "Deployment") != (got == "topology.kubernetes.io/zone") {
			t.Errorf("%s: topologySpreadConstraints %v", o, field(tmpl, "spec", "topologySpreadConstraints"))
		}
		if o.name() == "xila-guard-scheduler" && field(tmpl, "metadata", "annotations", "checksum/config") == nil {
			t.Errorf("%s lost its config checksum", o)
		}
	}
	if seen != 9 {
		t.Errorf("%d Deployments and DaemonSets rendered, want 9", seen)
	}
	vals["pods"] = map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "mine"}}
	if _, err := render(loadChart(t), vals); err == nil || !strings.Contains(err.Error(), "pods.labels cannot set app.kubernetes.io/name") {
		t.Errorf("a selector label in pods.labels: %v", err)
	}
}

// TestTEETaintsNeedObserveAndWebhook: the TEE taints without the observe
// controller (which keeps them) or the webhook (which tolerates them) fail
// the install instead of tainting nodes no pod can tolerate.
func TestTEETaintsNeedObserveAndWebhook(t *testing.T) {
	for _, off := range []string{"observe", "webhook"} {
		vals := readValues(t, "key-broker")
		vals[off].(map[string]any)["enabled"] = false
		if _, err := render(loadChart(t), withTestCA(t, vals)); err == nil || !strings.Contains(err.Error(), "confidential.teeTaints needs observe.enabled") {
			t.Errorf("teeTaints with %s off: %v", off, err)
		}
	}
}

// TestImageOverrides: image.components gives one component another
// repository, tag or digest and leaves the others alone; an unknown
// component or a malformed digest fails the schema.
func TestImageOverrides(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	vals := readValues(t, "monitoring")
	vals["image"] = map[string]any{"registry": "xila-guard", "pullPolicy": "IfNotPresent", "tag": "v1",
		"components": map[string]any{
			"webhook":    map[string]any{"repository": "mirror.example/guard-webhook", "digest": digest},
			"observe":    map[string]any{"tag": "v1-patched"},
			"gpudevices": map[string]any{"repository": "mirror.example/gpudevices"},
		}}
	want := map[string]string{
		"xila-guard-webhook":    "mirror.example/guard-webhook@" + digest,
		"xila-guard-observe":    "xila-guard/observe:v1-patched",
		"xila-guard-gpudevices": "mirror.example/gpudevices:v1",
		"xila-guard-scheduler":  "xila-guard/scheduler:v1",
		"xila-guard-agent":      "xila-guard/agent:v1",
	}
	seen := map[string]bool{}
	for _, o := range objects(t, mustRender(t, loadChart(t), withTestCA(t, vals)).Manifest) {
		if o.Kind != "Deployment" && o.Kind != "DaemonSet" {
			continue
		}
		w, ok := want[o.name()]
		if !ok {
			continue
		}
		seen[o.name()] = true
		if got := field(o.raw, "spec", "template", "spec", "containers", 0, "image"); got != w {
			t.Errorf("%s runs %v, want %s", o, got, w)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s not rendered", name)
		}
	}
	for _, bad := range []map[string]any{
		{"slurm": map[string]any{"tag": "x"}},
		{"webhook": map[string]any{"digest": "sha256:short"}},
	} {
		vals := map[string]any{"image": map[string]any{"registry": "r", "pullPolicy": "Always", "components": bad}}
		if _, err := render(loadChart(t), vals); err == nil {
			t.Errorf("image.components %v renders", bad)
		}
	}
}
