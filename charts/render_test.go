package charts

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "xila-guard"
	releaseName = "xila-guard"
	releaseNS   = "xila-guard-system"
)

// kubeVersion is the cluster version renders assume (hack/versions.env).
var kubeVersion = chartutil.KubeVersion{Version: "v1.35.4", Major: "1", Minor: "35"}

// loadChart loads the chart from disk; every test gets its own copy.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading chart %s: %v", chartDir, err)
	}
	return ch
}

// testCA is the CA bundle that values in TLS mode secret get when they
// name none.
func testCA(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "test-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readValues reads a values file of testdata/values.
func readValues(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "values", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(b, &vals); err != nil {
		t.Fatalf("values %s: %v", name, err)
	}
	return vals
}

// withTestCA fills webhook.tls.caBundle with the test CA when the values
// ask for TLS mode secret without one.
func withTestCA(t *testing.T, vals map[string]any) map[string]any {
	t.Helper()
	w, _ := vals["webhook"].(map[string]any)
	tls, _ := w["tls"].(map[string]any)
	if tls["mode"] == "secret" && tls["caBundle"] == nil {
		tls["caBundle"] = testCA(t)
	}
	return vals
}

// rendered is what `helm install` would apply: the manifest in install
// order, then the hooks in the order they run, and the notes.
type rendered struct {
	Manifest string
	Notes    string
}

// render renders the chart as `helm install --dry-run` does with no
// cluster, values checked against values.schema.json.
func render(ch *chart.Chart, vals map[string]any) (rendered, error) {
	cfg := &action.Configuration{Capabilities: chartutil.DefaultCapabilities.Copy()}
	cfg.Capabilities.KubeVersion = kubeVersion
	inst := action.NewInstall(cfg)
	inst.DryRun = true
	inst.ClientOnly = true
	inst.Replace = true
	inst.ReleaseName = releaseName
	inst.Namespace = releaseNS
	inst.KubeVersion = &kubeVersion
	rel, err := inst.Run(ch, vals)
	if err != nil {
		return rendered{}, err
	}
	manifest := rel.Manifest
	for _, h := range rel.Hooks {
		events := make([]string, len(h.Events))
		for i, e := range h.Events {
			events[i] = string(e)
		}
		manifest += "\n---\n# Source: " + h.Path + " (hook " + strings.Join(events, ",") + ", weight " + strconv.Itoa(h.Weight) + ")\n" + h.Manifest
	}
	return rendered{Manifest: manifest, Notes: rel.Info.Notes}, nil
}

func mustRender(t *testing.T, ch *chart.Chart, vals map[string]any) rendered {
	t.Helper()
	r, err := render(ch, vals)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return r
}

// object is one rendered manifest, decoded.
type object struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	raw        map[string]any
}

func (o object) name() string { s, _ := o.Metadata["name"].(string); return s }

func (o object) String() string { return o.Kind + "/" + o.name() }

// objects decodes a rendered manifest.
func objects(t *testing.T, manifest string) []object {
	t.Helper()
	var out []object
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("decoding a rendered manifest: %v\n%s", err, doc)
		}
		if o.Kind == "" {
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), &o.raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// find returns the object of a kind and name.
func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.name() == name {
			return o
		}
	}
	t.Fatalf("no %s/%s rendered; have %v", kind, name, objs)
	return object{}
}

// field walks a decoded object: field(o.raw, "spec", "template", 0, ...).
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// webhookArgs returns the webhook container's arguments.
func webhookArgs(t *testing.T, objs []object) []string {
	t.Helper()
	d := find(t, objs, "Deployment", "xila-guard-webhook")
	var args []string
	for _, a := range field(d.raw, "spec", "template", "spec", "containers", 0, "args").([]any) {
		args = append(args, a.(string))
	}
	return args
}

// flagValue returns the value of --name=value in args, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b))
}

// schedulerProfiles reads the webhook's --scheduler-profile flags: the
// selectors of each scheduler, each parsed and printed again so that two
// spellings of one selector compare equal.
func schedulerProfiles(t *testing.T, args []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, a := range args {
		v, ok := strings.CutPrefix(a, "--scheduler-profile=")
		if !ok {
			continue
		}
		name, sel, _ := strings.Cut(v, "=")
		s, err := labels.Parse(sel)
		if err != nil {
			t.Fatalf("--scheduler-profile=%s: %v", v, err)
		}
		out[name] = append(out[name], s.String())
	}
	return out
}

// labelSelector prints a workloadSelector of the values as labels.Parse
// would print it.
func labelSelector(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var ls metav1.LabelSelector
	if err := yaml.Unmarshal(b, &ls); err != nil {
		t.Fatal(err)
	}
	s, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		t.Fatal(err)
	}
	return s.String()
}
