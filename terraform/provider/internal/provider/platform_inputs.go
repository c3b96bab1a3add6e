package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/xila-guard/xila-guard/terraform/provider/internal/platform"
)

// stateSetter is the part of tfsdk.State that apply needs.
type stateSetter interface {
	Set(ctx context.Context, val any) diag.Diagnostics
}

type platformChart struct {
	chart  *chart.Chart
	digest string
}

var (
	releaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$`)
	dnsLabel    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// validatePlatformConfig checks what can be checked from the configuration
// alone, naming the attribute at fault.
func validatePlatformConfig(m platformModel) (diags diag.Diagnostics) {
	// Either may be unknown while Terraform validates (a conditional over a
	// variable or another resource); the check then waits for the plan,
	// where both are known.
	known := !m.Kubeconfig.IsUnknown() && !m.KubeconfigPath.IsUnknown()
	hasContent, hasPath := !m.Kubeconfig.IsNull(), !m.KubeconfigPath.IsNull()
	switch {
	case !known:
	case hasContent && hasPath:
		diags.AddAttributeError(path.Root("kubeconfig_path"), "Conflicting kubeconfig", "set exactly one of kubeconfig and kubeconfig_path, not both")
	case !hasContent && !hasPath:
		diags.AddAttributeError(path.Root("kubeconfig"), "Missing kubeconfig", "set kubeconfig (content) or kubeconfig_path (a file) to say which cluster gets the platform")
	}
	diags.Append(validateDuration(path.Root("timeout"), m.Timeout)...)
	if v := m.ReleaseName; !v.IsNull() && !v.IsUnknown() && !releaseName.MatchString(v.ValueString()) {
		diags.AddAttributeError(path.Root("release_name"), "Invalid release name", fmt.Sprintf("%q: must be at most 53 lower-case letters, digits or '-', starting and ending with a letter or digit", v.ValueString()))
	}
	if v := m.Namespace; !v.IsNull() && !v.IsUnknown() && !dnsLabel.MatchString(v.ValueString()) {
		diags.AddAttributeError(path.Root("namespace"), "Invalid namespace", fmt.Sprintf("%q: must be a DNS label (at most 63 lower-case letters, digits or '-')", v.ValueString()))
	}
	if v := m.Values; !v.IsNull() && !v.IsUnknown() {
		if _, err := platform.ParseValues(v.ValueString()); err != nil {
			diags.AddAttributeError(path.Root("values"), "Invalid values", err.Error())
		}
	}
	if l := m.OrchestratorProfiles; !l.IsNull() && !l.IsUnknown() {
		seen := map[string]int{}
		for i, e := range l.Elements() {
			s, ok := e.(types.String)
			if !ok || s.IsUnknown() {
				continue
			}
			if s.IsNull() || s.ValueString() == "" {
				diags.AddAttributeError(path.Root("orchestrator_profiles").AtListIndex(i), "Empty profile name", "name a file of profiles_dir without .yaml")
				continue
			}
			if j, dup := seen[s.ValueString()]; dup {
				diags.AddAttributeError(path.Root("orchestrator_profiles").AtListIndex(i), "Duplicate profile", fmt.Sprintf("%q is already listed at index %d", s.ValueString(), j))
			}
			seen[s.ValueString()] = i
		}
		if len(l.Elements()) > 0 && m.ProfilesDir.IsNull() {
			diags.AddAttributeError(path.Root("profiles_dir"), "Missing profiles_dir", "orchestrator_profiles names files of a profiles directory: set profiles_dir (profiles/ in the repository)")
		}
	}
	return diags
}

// kubeconfigOf returns how to reach the cluster of m, and false while that
// is not known yet.
func kubeconfigOf(m platformModel) (platform.Kubeconfig, bool) {
	kc := platform.Kubeconfig{Context: m.KubeContext.ValueString()}
	if m.KubeContext.IsUnknown() {
		return kc, false
	}
	switch {
	case m.Kubeconfig.IsUnknown() || m.KubeconfigPath.IsUnknown():
		return kc, false
	case !m.Kubeconfig.IsNull():
		kc.Content = m.Kubeconfig.ValueString()
	case !m.KubeconfigPath.IsNull():
		kc.Path = m.KubeconfigPath.ValueString()
	default:
		return kc, false
	}
	return kc, true
}

// resolve turns the inputs of m into the values for Helm, checking them
// against the chart. It returns nil, and no error, while an input is still
// unknown.
func resolve(ctx context.Context, m platformModel) (*desired, diag.Diagnostics) {
	var diags diag.Diagnostics
	if m.ChartPath.IsUnknown() || m.Values.IsUnknown() || m.OrchestratorProfiles.IsUnknown() ||
		m.Features.IsUnknown() || m.ProfilesDir.IsUnknown() || m.CRDsDir.IsUnknown() || m.ReleaseName.IsUnknown() || m.Namespace.IsUnknown() {
		return nil, nil
	}
	if m.ChartPath.IsNull() {
		diags.AddAttributeError(path.Root("chart_path"), "Missing chart_path", "set chart_path to the xila-guard chart (charts/xila-guard in the repository)")
		return nil, diags
	}
	ch, err := platform.LoadChart(m.ChartPath.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("chart_path"), "Cannot load the chart", err.Error())
		return nil, diags
	}
	var crds *platform.CRDs
	if !m.CRDsDir.IsNull() {
		if crds, err = platform.LoadCRDs(m.CRDsDir.ValueString()); err != nil {
			diags.AddAttributeError(path.Root("crds_dir"), "Invalid CRDs", err.Error())
		}
	}
	in := platform.Input{Values: m.Values.ValueString(), Features: map[string]bool{}}
	names, d := stringList(ctx, m.OrchestratorProfiles)
	diags.Append(d...)
	for i, name := range names {
		p, err := platform.LoadProfile(m.ProfilesDir.ValueString(), name)
		if err != nil {
			summary := "Invalid orchestrator profile"
			var unknown *platform.UnknownProfileError
			if errors.As(err, &unknown) {
				summary = "Unknown orchestrator profile"
			}
			diags.AddAttributeError(path.Root("orchestrator_profiles").AtListIndex(i), summary, err.Error())
			continue
		}
		in.Profiles = append(in.Profiles, p)
	}
	if !m.Features.IsNull() {
		for k, v := range m.Features.Elements() {
			b, ok := v.(types.Bool)
			if !ok || b.IsUnknown() {
				return nil, diags
			}
			if b.IsNull() {
				continue
			}
			in.Features[k] = b.ValueBool()
		}
	}
	if diags.HasError() {
		return nil, diags
	}
	vals, err := platform.Compose(ch, in)
	if err != nil {
		var fe *platform.FieldError
		if errors.As(err, &fe) && strings.HasPrefix(fe.Path, "features.") {
			diags.AddAttributeError(path.Root("features").AtMapKey(strings.TrimPrefix(fe.Path, "features.")), "Unknown feature", fe.Message)
		} else {
			diags.AddAttributeError(path.Root("values"), "Invalid values", err.Error())
		}
		return nil, diags
	}
	schemaErrs, err := platform.CheckSchema(ch, vals)
	if err != nil {
		diags.AddAttributeError(path.Root("chart_path"), "Cannot check values against the chart's schema", err.Error())
		return nil, diags
	}
	for _, fe := range schemaErrs {
		diags.AddAttributeError(path.Root("values"), "Invalid chart value "+fe.Path,
			fmt.Sprintf("%s (checked against %s/values.schema.json of chart %s %s)", fe.Error(), m.ChartPath.ValueString(), ch.Name(), ch.Metadata.Version))
	}
	if diags.HasError() {
		return nil, diags
	}
	if _, err := platform.Render(ch, m.ReleaseName.ValueString(), m.Namespace.ValueString(), vals); err != nil {
		diags.AddAttributeError(path.Root("values"), "The chart does not render with these values", err.Error())
		return nil, diags
	}
	digest, err := platform.Digest(vals)
	if err != nil {
		diags.AddAttributeError(path.Root("values"), "Invalid values", err.Error())
		return nil, diags
	}
	return &desired{
		chartVersion: ch.Metadata.Version,
		chartDigest:  platform.ChartDigest(ch),
		valuesDigest: digest,
		crds:         crds,
		values:       vals,
		chart:        &platformChart{chart: ch, digest: platform.ChartDigest(ch)},
	}, diags
}

// describeImported fills the inputs of an imported release from what it
// runs: feature switches, and the rest of its values as YAML.
func describeImported(m *platformModel, rel *platform.Release) (diags diag.Diagnostics) {
	rest, features, _, err := platform.Decompose(rel.Defaults, rel.Config, nil)
	if err != nil {
		diags.AddError("Cannot describe the imported release", err.Error())
		return diags
	}
	if rest != "" {
		m.Values = types.StringValue(rest)
	}
	if len(features) > 0 {
		fv, d := types.MapValueFrom(context.Background(), types.BoolType, features)
		diags.Append(d...)
		m.Features = fv
	}
	return diags
}
