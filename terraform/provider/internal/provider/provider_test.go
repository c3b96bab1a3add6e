package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestSchemasAreValid(t *testing.T) {
	ctx := context.Background()
	p := New("test")()
	var presp fwprovider.SchemaResponse
	p.Schema(ctx, fwprovider.SchemaRequest{}, &presp)
	if presp.Diagnostics.HasError() {
		t.Fatalf("provider schema: %v", presp.Diagnostics)
	}
	names := map[string]bool{}
	for _, f := range p.Resources(ctx) {
		r := f()
		var meta resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "xilaguard"}, &meta)
		names[meta.TypeName] = true
		var sresp resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sresp)
		if sresp.Diagnostics.HasError() {
			t.Errorf("%s schema: %v", meta.TypeName, sresp.Diagnostics)
		}
		if d := sresp.Schema.ValidateImplementation(ctx); d.HasError() {
			t.Errorf("%s schema: %v", meta.TypeName, d)
		}
		for name, a := range sresp.Schema.Attributes {
			if a.GetDescription() == "" {
				t.Errorf("%s.%s has no description", meta.TypeName, name)
			}
		}
	}
	for _, want := range []string{"xilaguard_kind_cluster", "xilaguard_platform"} {
		if !names[want] {
			t.Errorf("provider has no resource %s", want)
		}
	}
}

// platformConfig is a valid configuration that tests change one field of.
func platformConfig() platformModel {
	return platformModel{
		Kubeconfig: types.StringNull(), KubeconfigPath: types.StringValue("/tmp/kubeconfig"), KubeContext: types.StringNull(),
		ChartPath: types.StringValue("../platform/testdata/chart"), ProfilesDir: types.StringValue("../platform/testdata/profiles"),
		ReleaseName: types.StringValue("xila-guard"), Namespace: types.StringValue("xila-guard-system"),
		Values: types.StringNull(), OrchestratorProfiles: types.ListNull(types.StringType), Features: types.MapNull(types.BoolType),
		Timeout: types.StringValue("5m"),
	}
}

func list(names ...string) types.List {
	var elems []attr.Value
	for _, n := range names {
		elems = append(elems, types.StringValue(n))
	}
	return types.ListValueMust(types.StringType, elems)
}

// summary writes diagnostics as "path: summary: detail" lines.
func summary(d diag.Diagnostics) string {
	var b strings.Builder
	for _, e := range d.Errors() {
		if wp, ok := e.(diag.DiagnosticWithPath); ok {
			b.WriteString(wp.Path().String() + ": ")
		}
		b.WriteString(e.Summary() + ": " + e.Detail() + "\n")
	}
	return b.String()
}

func TestValidatePlatformConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*platformModel)
		want   string
	}{
		{name: "valid", mutate: func(*platformModel) {}},
		{name: "both kubeconfigs", mutate: func(m *platformModel) { m.Kubeconfig = types.StringValue("x") }, want: "kubeconfig_path: Conflicting kubeconfig"},
		{name: "no kubeconfig", mutate: func(m *platformModel) { m.KubeconfigPath = types.StringNull() }, want: "kubeconfig: Missing kubeconfig"},
		{name: "unknown kubeconfig is fine", mutate: func(m *platformModel) { m.KubeconfigPath = types.StringNull(); m.Kubeconfig = types.StringUnknown() }},
		{name: "both unknown is fine", mutate: func(m *platformModel) { m.KubeconfigPath = types.StringUnknown(); m.Kubeconfig = types.StringUnknown() }},
		{name: "unknown content and a path is fine", mutate: func(m *platformModel) { m.Kubeconfig = types.StringUnknown() }},
		{name: "bad timeout", mutate: func(m *platformModel) { m.Timeout = types.StringValue("5 minutes") }, want: `timeout: Invalid duration: must be a positive Go duration such as "90s" or "5m", not "5 minutes"`},
		{name: "bad release", mutate: func(m *platformModel) { m.ReleaseName = types.StringValue("Xila_Guard") }, want: "release_name: Invalid release name"},
		{name: "bad namespace", mutate: func(m *platformModel) { m.Namespace = types.StringValue("a.b") }, want: "namespace: Invalid namespace"},
		{name: "values not YAML", mutate: func(m *platformModel) { m.Values = types.StringValue("a: [") }, want: "values: Invalid values: values is not valid YAML"},
		{name: "profiles without dir", mutate: func(m *platformModel) { m.OrchestratorProfiles = list("volcano"); m.ProfilesDir = types.StringNull() }, want: "profiles_dir: Missing profiles_dir"},
		{name: "duplicate profile", mutate: func(m *platformModel) { m.OrchestratorProfiles = list("volcano", "kai", "volcano") }, want: `orchestrator_profiles[2]: Duplicate profile: "volcano" is already listed at index 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := platformConfig()
			tc.mutate(&m)
			got := summary(validatePlatformConfig(m))
			if tc.want == "" {
				if got != "" {
					t.Fatalf("unexpected errors:\n%s", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("errors:\n%s\nwant one containing %q", got, tc.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*platformModel)
		want   string
	}{
		{name: "valid", mutate: func(m *platformModel) {
			m.OrchestratorProfiles = list("volcano", "kai")
			m.Features = types.MapValueMust(types.BoolType, map[string]attr.Value{"enforcement": types.BoolValue(true)})
		}},
		{name: "crds_dir without CRDs", mutate: func(m *platformModel) { m.CRDsDir = types.StringValue("../platform/testdata/profiles") },
			want: "crds_dir: Invalid CRDs: ../platform/testdata/profiles/broken.yaml: want apiextensions.k8s.io/v1 CustomResourceDefinition"},
		{name: "unknown profile", mutate: func(m *platformModel) { m.OrchestratorProfiles = list("volcano", "yunikorn") },
			want: `orchestrator_profiles[1]: Unknown orchestrator profile: unknown orchestrator profile "yunikorn": ../platform/testdata/profiles has no yunikorn.yaml (available: broken, kai, volcano)`},
		{name: "unknown feature", mutate: func(m *platformModel) {
			m.Features = types.MapValueMust(types.BoolType, map[string]attr.Value{"observe": types.BoolValue(true)})
		}, want: `features["observe"]: Unknown feature: chart sample 1.2.3 has no feature "observe" (its features: enforcement, tenantRBAC)`},
		{name: "schema error names the field", mutate: func(m *platformModel) { m.Values = types.StringValue("enforcement: {profile: staging}") },
			want: "values: Invalid chart value enforcement.profile: enforcement.profile: value must be one of 'production', 'lab'"},
		{name: "chart's own failure", mutate: func(m *platformModel) {
			m.Values = types.StringValue("enforcement: {enabled: true}\nwebhook: {replicas: 9}")
		}, want: "values: The chart does not render with these values"},
		{name: "missing chart", mutate: func(m *platformModel) { m.ChartPath = types.StringValue("/nonexistent/chart") }, want: "chart_path: Cannot load the chart"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := platformConfig()
			tc.mutate(&m)
			want, d := resolve(context.Background(), m)
			got := summary(d)
			if tc.want == "" {
				if got != "" || want == nil {
					t.Fatalf("resolve = %v, errors:\n%s", want, got)
				}
				if want.chartVersion != "1.2.3" || len(want.valuesDigest) != 64 || len(want.chartDigest) != 64 {
					t.Errorf("resolve = %+v", want)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("errors:\n%s\nwant one containing %q", got, tc.want)
			}
		})
	}
}

func TestResolveWaitsForUnknownInputs(t *testing.T) {
	m := platformConfig()
	m.Values = types.StringUnknown()
	want, d := resolve(context.Background(), m)
	if want != nil || d.HasError() {
		t.Fatalf("resolve = %v, %v; want nil and no error while values is unknown", want, d)
	}
}

func TestValidateKindCluster(t *testing.T) {
	m := kindClusterModel{
		Name: types.StringValue("Bad_Name"), NodeImage: types.StringNull(), Workers: types.Int64Null(),
		PodSubnet: types.StringNull(), ServiceSubnet: types.StringNull(), WaitTimeout: types.StringValue("soon"),
	}
	got := summary(validateKindCluster(m))
	for _, want := range []string{`wait_timeout: Invalid duration`, `Invalid xilaguard_kind_cluster: name "Bad_Name"`} {
		if !strings.Contains(got, want) {
			t.Errorf("errors:\n%s\nwant one containing %q", got, want)
		}
	}
	m.Name, m.WaitTimeout = types.StringValue("xg-lab"), types.StringNull()
	if got := summary(validateKindCluster(m)); got != "" {
		t.Errorf("valid cluster: %s", got)
	}
}
