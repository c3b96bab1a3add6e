package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/xila-guard/xila-guard/terraform/provider/internal/kindlab"
)

type diagnostics = diag.Diagnostics

// stringList returns the elements of a known list of strings; a null list
// is empty.
func stringList(ctx context.Context, l types.List) ([]string, diag.Diagnostics) {
	if l.IsNull() || l.IsUnknown() {
		return nil, nil
	}
	var out []string
	diags := l.ElementsAs(ctx, &out, false)
	return out, diags
}

// validateDuration checks a known duration attribute.
func validateDuration(p path.Path, v types.String) (diags diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	d, err := time.ParseDuration(v.ValueString())
	if err != nil || d <= 0 {
		diags.AddAttributeError(p, "Invalid duration", `must be a positive Go duration such as "90s" or "5m", not "`+v.ValueString()+`"`)
	}
	return diags
}

// validateKindCluster checks the known attributes of a cluster
// configuration and names the one at fault.
func validateKindCluster(m kindClusterModel) (diags diag.Diagnostics) {
	diags.Append(validateDuration(path.Root("wait_timeout"), m.WaitTimeout)...)
	known := func(v attr.Value) bool { return !v.IsUnknown() }
	if !known(m.Name) || !known(m.NodeImage) || !known(m.Workers) || !known(m.PodSubnet) || !known(m.ServiceSubnet) {
		return diags
	}
	spec := kindlab.Spec{
		Name:          m.Name.ValueString(),
		NodeImage:     stringOr(m.NodeImage, kindlab.DefaultNodeImage),
		Workers:       int(int64Or(m.Workers, kindlab.DefaultWorkers)),
		PodSubnet:     stringOr(m.PodSubnet, kindlab.DefaultPodSubnet),
		ServiceSubnet: stringOr(m.ServiceSubnet, kindlab.DefaultServiceSubnet),
	}
	if err := spec.Validate(); err != nil {
		diags.AddError("Invalid xilaguard_kind_cluster", err.Error())
	}
	return diags
}

func stringOr(v types.String, def string) string {
	if v.IsNull() {
		return def
	}
	return v.ValueString()
}

func int64Or(v types.Int64, def int64) int64 {
	if v.IsNull() {
		return def
	}
	return v.ValueInt64()
}
