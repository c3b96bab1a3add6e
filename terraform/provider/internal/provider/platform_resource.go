package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/xila-guard/xila-guard/terraform/provider/internal/platform"
)

const (
	defaultRelease         = "xila-guard"
	defaultNamespace       = "xila-guard-system"
	defaultPlatformTimeout = "5m"
)

// platformResource is xilaguard_platform: the xila-guard chart as one Helm
// release.
type platformResource struct{}

var (
	_ resource.Resource                   = &platformResource{}
	_ resource.ResourceWithImportState    = &platformResource{}
	_ resource.ResourceWithModifyPlan     = &platformResource{}
	_ resource.ResourceWithValidateConfig = &platformResource{}
)

// NewPlatformResource returns the xilaguard_platform resource.
func NewPlatformResource() resource.Resource { return &platformResource{} }

type platformModel struct {
	ID                   types.String `tfsdk:"id"`
	Kubeconfig           types.String `tfsdk:"kubeconfig"`
	KubeconfigPath       types.String `tfsdk:"kubeconfig_path"`
	KubeContext          types.String `tfsdk:"kube_context"`
	ChartPath            types.String `tfsdk:"chart_path"`
	ProfilesDir          types.String `tfsdk:"profiles_dir"`
	CRDsDir              types.String `tfsdk:"crds_dir"`
	ReleaseName          types.String `tfsdk:"release_name"`
	Namespace            types.String `tfsdk:"namespace"`
	Values               types.String `tfsdk:"values"`
	OrchestratorProfiles types.List   `tfsdk:"orchestrator_profiles"`
	Features             types.Map    `tfsdk:"features"`
	Timeout              types.String `tfsdk:"timeout"`
	ChartVersion         types.String `tfsdk:"chart_version"`
	ChartDigest          types.String `tfsdk:"chart_digest"`
	ValuesDigest         types.String `tfsdk:"values_digest"`
	CRDsDigest           types.String `tfsdk:"crds_digest"`
	Revision             types.Int64  `tfsdk:"revision"`
	Status               types.String `tfsdk:"status"`
}

func (r *platformResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_platform"
}

func (r *platformResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "The xila-guard platform chart installed as one Helm release on any cluster. " +
			"Changes upgrade the release in place and wait for its workloads; destroy uninstalls it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "<namespace>/<release_name>, also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"kubeconfig": schema.StringAttribute{
				Optional: true, Sensitive: true,
				Description: "Kubeconfig content of the target cluster (for example xilaguard_kind_cluster.kubeconfig). Exactly one of kubeconfig and kubeconfig_path.",
			},
			"kubeconfig_path": schema.StringAttribute{
				Optional:    true,
				Description: "Path of a kubeconfig file for the target cluster. Exactly one of kubeconfig and kubeconfig_path.",
			},
			"kube_context": schema.StringAttribute{
				Optional: true, Description: "Context of the kubeconfig to use; its current context when unset.",
			},
			"chart_path": schema.StringAttribute{
				Required:    true,
				Description: "Directory (or .tgz) of the xila-guard chart, charts/xila-guard in the repository.",
			},
			"profiles_dir": schema.StringAttribute{
				Optional:    true,
				Description: "Directory of orchestrator profiles (profiles/ in the repository); required when orchestrator_profiles is set.",
			},
			"crds_dir": schema.StringAttribute{
				Optional: true,
				Description: "Directory of the CustomResourceDefinitions the platform watches (components/api/config/crd in the repository). " +
					"Applied server-side, and waited for until Established, before every install or upgrade; kept on destroy, " +
					"because deleting a CRD deletes every object of its kind. Unset: the CRDs are managed outside Terraform.",
			},
			"release_name": schema.StringAttribute{
				Optional: true, Computed: true, PlanModifiers: replace,
				Default: stringdefault.StaticString(defaultRelease), Description: "Helm release name.",
			},
			"namespace": schema.StringAttribute{
				Optional: true, Computed: true, PlanModifiers: replace,
				Default: stringdefault.StaticString(defaultNamespace), Description: "Namespace of the release; created when missing.",
			},
			"values": schema.StringAttribute{
				Optional:    true,
				Description: "Chart values as a YAML document (yamlencode(...) or a file). Checked against the chart's values.schema.json at plan time.",
			},
			"orchestrator_profiles": schema.ListAttribute{
				ElementType: types.StringType, Optional: true,
				Description: "Orchestrator profiles by name (profiles/<name>.yaml), appended to the chart's orchestratorIntegrations.",
			},
			"features": schema.MapAttribute{
				ElementType: types.BoolType, Optional: true,
				Description: "Feature switches by chart section: { enforcement = true } sets enforcement.enabled. Unset features keep the chart's default (off).",
			},
			"timeout": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultPlatformTimeout),
				Description: "How long an install, upgrade or uninstall may wait for the workloads, as a Go duration.",
			},
			"chart_version": schema.StringAttribute{Computed: true, Description: "Version of the chart the release runs."},
			"chart_digest": schema.StringAttribute{
				Computed:    true,
				Description: "SHA-256 of the chart's files: a changed chart shows up in the plan as an upgrade.",
			},
			"values_digest": schema.StringAttribute{
				Computed:    true,
				Description: "SHA-256 of the values given to Helm (values, profiles and features together): a changed profile file, or values changed outside Terraform, show up here.",
			},
			"crds_digest": schema.StringAttribute{
				Computed:    true,
				Description: "SHA-256 of the files of crds_dir: changed CRD files show up in the plan as an update.",
			},
			"revision": schema.Int64Attribute{Computed: true, Description: "Helm revision of the release."},
			"status":   schema.StringAttribute{Computed: true, Description: "Helm status of the release (deployed, failed, ...)."},
		},
	}
}

func (r *platformResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m platformModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(validatePlatformConfig(m)...)
}

// desired is what a plan asks Helm for, once every input is known.
type desired struct {
	chartVersion string
	chartDigest  string
	valuesDigest string
	crds         *platform.CRDs
	values       map[string]any
	chart        *platformChart
}

// ModifyPlan does, at plan time, every check that needs no cluster: chart,
// profiles, values against the chart's schema, and a client-side render.
// It fills in the digests so that a changed chart or profile file shows up
// as an in-place upgrade.
func (r *platformResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan platformModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	want, diags := resolve(ctx, plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() || want == nil {
		return
	}
	plan.ChartVersion = types.StringValue(want.chartVersion)
	plan.ChartDigest = types.StringValue(want.chartDigest)
	plan.ValuesDigest = types.StringValue(want.valuesDigest)
	plan.CRDsDigest = crdsDigest(want.crds)
	if !req.State.Raw.IsNull() {
		var state platformModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if !state.ChartDigest.Equal(plan.ChartDigest) || !state.ValuesDigest.Equal(plan.ValuesDigest) || !state.CRDsDigest.Equal(plan.CRDsDigest) {
			plan.Revision = types.Int64Unknown()
			plan.Status = types.StringUnknown()
		}
	} else if kc, ok := kubeconfigOf(plan); ok {
		// A new release on a cluster that is already known: say now that
		// the cluster cannot be reached, not halfway through apply.
		if _, err := platform.Connect(ctx, kc, plan.Namespace.ValueString()); err != nil {
			addConnectError(&resp.Diagnostics, err)
			return
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *platformResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan platformModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.apply(ctx, plan, &resp.State, &resp.Diagnostics)
}

func (r *platformResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan platformModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.apply(ctx, plan, &resp.State, &resp.Diagnostics)
}

// apply installs or upgrades the release to plan and records the result.
// A release Helm recorded but could not make ready is still saved, so
// Terraform marks it tainted and replaces it next time.
func (r *platformResource) apply(ctx context.Context, plan platformModel, state stateSetter, diags *diagnostics) {
	want, d := resolve(ctx, plan)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	if want == nil {
		diags.AddError("Inputs still unknown at apply", "chart_path, values, orchestrator_profiles and features must be known when the release is applied")
		return
	}
	kc, _ := kubeconfigOf(plan)
	ns, name := plan.Namespace.ValueString(), plan.ReleaseName.ValueString()
	client, err := platform.Connect(ctx, kc, ns)
	if err != nil {
		addConnectError(diags, err)
		return
	}
	timeout, _ := time.ParseDuration(plan.Timeout.ValueString())
	if err := client.ApplyCRDs(ctx, want.crds, timeout); err != nil {
		diags.AddAttributeError(path.Root("crds_dir"), "Cannot apply the CRDs", err.Error())
		return
	}
	rel, err := client.Apply(ctx, want.chart.chart, name, want.values, timeout)
	if err != nil {
		diags.AddError("Cannot apply the xila-guard release", err.Error())
		if rel == nil {
			return
		}
	}
	plan.ID = types.StringValue(ns + "/" + name)
	plan.ChartVersion = types.StringValue(want.chartVersion)
	plan.ChartDigest = types.StringValue(want.chartDigest)
	plan.ValuesDigest = types.StringValue(want.valuesDigest)
	plan.CRDsDigest = crdsDigest(want.crds)
	plan.Revision = types.Int64Value(int64(rel.Revision))
	plan.Status = types.StringValue(rel.Status)
	diags.Append(state.Set(ctx, &plan)...)
}

func (r *platformResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m platformModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	kc, ok := kubeconfigOf(m)
	if !ok {
		resp.Diagnostics.AddError("No kubeconfig in state", "set kubeconfig or kubeconfig_path")
		return
	}
	client, err := platform.Connect(ctx, kc, m.Namespace.ValueString())
	if err != nil {
		addConnectError(&resp.Diagnostics, err)
		return
	}
	rel, err := client.Get(m.ReleaseName.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the xila-guard release", err.Error())
		return
	}
	if rel == nil || rel.Status == "uninstalled" {
		resp.State.RemoveResource(ctx)
		return
	}
	m.Revision = types.Int64Value(int64(rel.Revision))
	m.Status = types.StringValue(rel.Status)
	m.ChartVersion = types.StringValue(rel.ChartVersion)
	digest, err := platform.Digest(rel.Config)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the xila-guard release", err.Error())
		return
	}
	// Values changed outside Terraform (helm upgrade by hand) show up as a
	// different digest, which the next plan puts back.
	m.ValuesDigest = types.StringValue(digest)
	if m.ChartPath.IsNull() {
		// Just imported: describe the release in this resource's terms.
		resp.Diagnostics.Append(describeImported(&m, rel)...)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *platformResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m platformModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	kc, _ := kubeconfigOf(m)
	client, err := platform.Connect(ctx, kc, m.Namespace.ValueString())
	if err != nil {
		addConnectError(&resp.Diagnostics, err)
		resp.Diagnostics.AddError("Release not uninstalled",
			"the release stays in Terraform's state; when the cluster is gone for good, drop it with terraform state rm")
		return
	}
	timeout, err := time.ParseDuration(m.Timeout.ValueString())
	if err != nil {
		timeout, _ = time.ParseDuration(defaultPlatformTimeout)
	}
	if err := client.Uninstall(m.ReleaseName.ValueString(), timeout); err != nil {
		resp.Diagnostics.AddError("Cannot uninstall the xila-guard release", err.Error())
	}
}

// ImportState adopts an existing release. The ID is <namespace>/<release>;
// the cluster is the one of the KUBECONFIG environment variable (or
// ~/.kube/config), recorded as kubeconfig_path.
func (r *platformResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, ok := strings.Cut(req.ID, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("want <namespace>/<release_name>, such as %s/%s, not %q", defaultNamespace, defaultRelease, req.ID))
		return
	}
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		home, _ := os.UserHomeDir()
		kubeconfig = home + "/.kube/config"
	}
	if strings.Contains(kubeconfig, string(os.PathListSeparator)) {
		resp.Diagnostics.AddError("Ambiguous KUBECONFIG", "import reads one kubeconfig file; set KUBECONFIG to a single path")
		return
	}
	m := platformModel{
		ID: types.StringValue(req.ID), Kubeconfig: types.StringNull(), KubeconfigPath: types.StringValue(kubeconfig),
		KubeContext: types.StringNull(), ChartPath: types.StringNull(), ProfilesDir: types.StringNull(),
		CRDsDir: types.StringNull(), CRDsDigest: types.StringNull(), ReleaseName: types.StringValue(name), Namespace: types.StringValue(ns), Values: types.StringNull(),
		OrchestratorProfiles: types.ListNull(types.StringType), Features: types.MapNull(types.BoolType),
		Timeout: types.StringValue(defaultPlatformTimeout), ChartVersion: types.StringNull(), ChartDigest: types.StringNull(),
		ValuesDigest: types.StringNull(), Revision: types.Int64Null(), Status: types.StringNull(),
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// crdsDigest is the digest of crds, or null when the platform has no
// crds_dir.
func crdsDigest(crds *platform.CRDs) types.String {
	if crds == nil {
		return types.StringNull()
	}
	return types.StringValue(crds.Digest)
}

func addConnectError(diags *diagnostics, err error) {
	var unreachable *platform.UnreachableError
	if errors.As(err, &unreachable) {
		diags.AddError("Cluster unreachable", err.Error())
		return
	}
	diags.AddError("Invalid kubeconfig", err.Error())
}
