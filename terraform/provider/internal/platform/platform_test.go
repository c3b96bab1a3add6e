package platform

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
)

func TestLoadProfile(t *testing.T) {
	tests := []struct {
		name      string
		profile   string
		wantEntry map[string]any
		wantErr   string
	}{
		{
			name:    "integration entry, documentation dropped",
			profile: "volcano",
			wantEntry: map[string]any{
				"name": "volcano", "schedulerName": "volcano",
				"workloadSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "volcano.sh/job-name", "operator": "Exists"}}},
			},
		},
		{
			name:    "name defaults to the file name",
			profile: "kai",
			wantEntry: map[string]any{
				"name": "kai", "schedulerName": "kai-scheduler",
				"workloadSelector": map[string]any{"matchLabels": map[string]any{"kai.scheduler/queue": "default"}},
			},
		},
		{name: "unknown profile lists the known ones", profile: "yunikorn", wantErr: `unknown orchestrator profile "yunikorn": testdata/profiles has no yunikorn.yaml (available: broken, kai, volcano)`},
		{name: "no scheduler name", profile: "broken", wantErr: `orchestrator profile "broken" (testdata/profiles/broken.yaml): no schedulerName`},
		{name: "path traversal", profile: "../chart/values", wantErr: "a profile is named by its file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := LoadProfile("testdata/profiles", tc.profile)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !Equal(p.Entry, tc.wantEntry) {
				t.Errorf("entry = %#v, want %#v", p.Entry, tc.wantEntry)
			}
		})
	}
}

func TestUnknownProfileErrorType(t *testing.T) {
	_, err := LoadProfile("testdata/profiles", "nope")
	var unknown *UnknownProfileError
	if !errors.As(err, &unknown) || unknown.Name != "nope" {
		t.Fatalf("error = %#v, want *UnknownProfileError for nope", err)
	}
}

func TestCompose(t *testing.T) {
	ch, volcano := testChartAndVolcano(t)
	tests := []struct {
		name    string
		in      Input
		want    map[string]any
		wantErr string
	}{
		{name: "nothing", in: Input{}, want: map[string]any{}},
		{
			name: "feature switch over values",
			in:   Input{Values: "enforcement:\n  profile: lab\n", Features: map[string]bool{"enforcement": true}},
			want: map[string]any{"enforcement": map[string]any{"profile": "lab", "enabled": true}},
		},
		{
			name: "profiles after the values' own integrations",
			in:   Input{Values: "orchestratorIntegrations:\n- {name: own, schedulerName: own}\n", Profiles: []Profile{volcano}},
			want: map[string]any{"orchestratorIntegrations": []any{
				map[string]any{"name": "own", "schedulerName": "own"},
				volcano.Entry,
			}},
		},
		{name: "unknown feature", in: Input{Features: map[string]bool{"webhook": true}}, wantErr: `features.webhook: chart sample 1.2.3 has no feature "webhook" (its features: enforcement, tenantRBAC)`},
		{name: "conflicting switch", in: Input{Values: "enforcement: {enabled: false}", Features: map[string]bool{"enforcement": true}}, wantErr: "enforcement.enabled: values sets false but features.enforcement is true"},
		{name: "same integration twice", in: Input{Values: "orchestratorIntegrations: [{name: volcano, schedulerName: x}]", Profiles: []Profile{volcano}}, wantErr: `integration "volcano" comes both from values and from orchestrator_profiles`},
		{name: "not a mapping", in: Input{Values: "- a\n- b\n"}, wantErr: "values must be a YAML mapping of chart values, not a list"},
		{name: "not YAML", in: Input{Values: "a: [b"}, wantErr: "values is not valid YAML"},
		{name: "integrations not a list", in: Input{Values: "orchestratorIntegrations: {}", Profiles: []Profile{volcano}}, wantErr: "orchestratorIntegrations: must be a list, not a mapping"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Compose(ch, tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !Equal(got, tc.want) {
				t.Errorf("values = %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestCheckSchemaNamesTheField(t *testing.T) {
	ch, err := LoadChart("testdata/chart")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		values string
		want   []string
	}{
		{name: "valid", values: "enforcement: {enabled: true, profile: lab}"},
		{name: "enum", values: "enforcement: {profile: staging}", want: []string{"enforcement.profile: value must be one of 'production', 'lab'"}},
		{name: "type and minimum", values: "enforcement: {enabled: yes please, replicas: 0}", want: []string{
			"enforcement.enabled: got string, want boolean",
			"enforcement.replicas: minimum: got 0, want 1",
		}},
		{name: "unknown key", values: "enforcment: {enabled: true}", want: []string{"(top level): additional properties 'enforcment' not allowed"}},
		{name: "list index", values: "orchestratorIntegrations: [{name: ok, schedulerName: a}, {name: Bad_Name, schedulerName: b}]", want: []string{
			"orchestratorIntegrations[1].name: 'Bad_Name' does not match pattern",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := ParseValues(tc.values)
			if err != nil {
				t.Fatal(err)
			}
			errs, err := CheckSchema(ch, vals)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors = %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestRenderReportsTheChartsOwnFailure(t *testing.T) {
	ch, err := LoadChart("testdata/chart")
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := Render(ch, "r", "ns", map[string]any{"enforcement": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(manifest, `enforcement: "true"`) {
		t.Errorf("manifest does not carry the values:\n%s", manifest)
	}
	_, err = Render(ch, "r", "ns", map[string]any{"enforcement": map[string]any{"enabled": true}, "webhook": map[string]any{"replicas": 9}})
	if err == nil || !strings.Contains(err.Error(), "webhook.replicas: at most 5 with enforcement on") {
		t.Fatalf("error = %v, want the chart's fail message", err)
	}
}

func TestDigestIgnoresNumberRepresentation(t *testing.T) {
	a, err := Digest(map[string]any{"x": map[string]any{"n": int64(2), "b": true}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Digest(map[string]any{"x": map[string]any{"b": true, "n": float64(2)}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Digest(map[string]any{"x": map[string]any{"b": true, "n": float64(3)}})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("equal values digest differently: %s, %s", a, b)
	}
	if a == c {
		t.Errorf("different values digest alike: %s", a)
	}
}

func TestDecomposeInvertsCompose(t *testing.T) {
	ch, volcano := testChartAndVolcano(t)
	in := Input{Values: "enforcement:\n  profile: lab\n", Features: map[string]bool{"enforcement": true, "tenantRBAC": false}, Profiles: []Profile{volcano}}
	vals, err := Compose(ch, in)
	if err != nil {
		t.Fatal(err)
	}
	rest, features, names, err := Decompose(ch.Values, vals, map[string]Profile{"volcano": volcano})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(features, in.Features) {
		t.Errorf("features = %v, want %v", features, in.Features)
	}
	if !reflect.DeepEqual(names, []string{"volcano"}) {
		t.Errorf("profiles = %v, want [volcano]", names)
	}
	if rest != "enforcement:\n  profile: lab\n" {
		t.Errorf("rest = %q", rest)
	}
}

// TestRepositoryChartAcceptsTheLab checks the repository's chart and
// profiles against what the lab example asks for, so a change to either
// that breaks terraform apply fails here first.
func TestRepositoryChartAcceptsTheLab(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..")
	ch, err := LoadChart(filepath.Join(root, "charts", "xila-guard"))
	if err != nil {
		t.Fatal(err)
	}
	var profiles []Profile
	for _, name := range []string{"volcano", "kai"} {
		p, err := LoadProfile(filepath.Join(root, "profiles"), name)
		if err != nil {
			t.Fatal(err)
		}
		profiles = append(profiles, p)
	}
	vals, err := Compose(ch, Input{
		Values:   "enforcement:\n  profile: lab\n  core: {replicas: 1}\nwebhook: {replicas: 1}\nimage: {tag: test}\n",
		Features: map[string]bool{"enforcement": true},
		Profiles: profiles,
	})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := CheckSchema(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("schema: %v", e)
	}
	manifest, err := Render(ch, "xila-guard", "xila-guard-system", vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: xila-guard-integration-volcano", "name: xila-guard-integration-kai"} {
		if !strings.Contains(manifest, want) {
			t.Errorf("manifest has no %q", want)
		}
	}
}

// testChartAndVolcano loads the test chart and the volcano test profile.
func testChartAndVolcano(t *testing.T) (*chart.Chart, Profile) {
	t.Helper()
	ch, err := LoadChart("testdata/chart")
	if err != nil {
		t.Fatal(err)
	}
	volcano, err := LoadProfile("testdata/profiles", "volcano")
	if err != nil {
		t.Fatal(err)
	}
	return ch, volcano
}
