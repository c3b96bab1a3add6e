package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/xila-guard/xila-guard/terraform/provider/internal/kindlab"
)

const defaultClusterWait = "5m"

// kindClusterResource is xilaguard_kind_cluster: a lab cluster made by the
// kind library, with the pod networking of make kind-up.
type kindClusterResource struct {
	lab *kindlab.Lab
}

var (
	_ resource.Resource                   = &kindClusterResource{}
	_ resource.ResourceWithImportState    = &kindClusterResource{}
	_ resource.ResourceWithModifyPlan     = &kindClusterResource{}
	_ resource.ResourceWithValidateConfig = &kindClusterResource{}
)

// NewKindClusterResource returns the xilaguard_kind_cluster resource.
func NewKindClusterResource() resource.Resource {
	return &kindClusterResource{lab: kindlab.New()}
}

type kindClusterModel struct {
	ID            types.String `tfsdk:"id"`
	Name          types.String `tfsdk:"name"`
	NodeImage     types.String `tfsdk:"node_image"`
	Workers       types.Int64  `tfsdk:"workers"`
	PodSubnet     types.String `tfsdk:"pod_subnet"`
	ServiceSubnet types.String `tfsdk:"service_subnet"`
	LoadImages    types.List   `tfsdk:"load_images"`
	WaitTimeout   types.String `tfsdk:"wait_timeout"`
	NodeImageID   types.String `tfsdk:"node_image_id"`
	Kubeconfig    types.String `tfsdk:"kubeconfig"`
	Endpoint      types.String `tfsdk:"endpoint"`
}

func (r *kindClusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_kind_cluster"
}

func (r *kindClusterResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A kind cluster for the Xila Guard lab: one control plane and `workers` workers from the offline node image, " +
			"with the pod networking of `make kind-up` (ptp + host-local + portmap per node, routes between nodes, masquerade out of the pod network). " +
			"Any change to its shape replaces the cluster.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "The cluster name.", PlanModifiers: keep,
			},
			"name": schema.StringAttribute{
				Required: true, PlanModifiers: replace,
				Description: "Name of the kind cluster; its node containers are called <name>-control-plane, <name>-worker, ...",
			},
			"node_image": schema.StringAttribute{
				Optional: true, Computed: true, PlanModifiers: replace,
				Default:     stringdefault.StaticString(kindlab.DefaultNodeImage),
				Description: fmt.Sprintf("Node image. Defaults to the offline image %s built by make kind-image; it must be present in the local Docker daemon.", kindlab.DefaultNodeImage),
			},
			"workers": schema.Int64Attribute{
				Optional: true, Computed: true,
				Default:       int64default.StaticInt64(kindlab.DefaultWorkers),
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
				Description:   fmt.Sprintf("Number of worker nodes, 0 to %d.", kindlab.MaxWorkers),
			},
			"pod_subnet": schema.StringAttribute{
				Optional: true, Computed: true, PlanModifiers: replace,
				Default:     stringdefault.StaticString(kindlab.DefaultPodSubnet),
				Description: "IPv4 CIDR of the pod network; each node gets a /24 from it.",
			},
			"service_subnet": schema.StringAttribute{
				Optional: true, Computed: true, PlanModifiers: replace,
				Default:     stringdefault.StaticString(kindlab.DefaultServiceSubnet),
				Description: "IPv4 CIDR of Service cluster IPs.",
			},
			"load_images": schema.ListAttribute{
				ElementType: types.StringType, Optional: true,
				Description: "Local Docker images to load into every node (the component images the chart runs). Adding one loads it in place.",
			},
			"wait_timeout": schema.StringAttribute{
				Optional: true, Computed: true,
				Default:     stringdefault.StaticString(defaultClusterWait),
				Description: "How long to wait for every node and CoreDNS to be Ready, as a Go duration.",
			},
			"node_image_id": schema.StringAttribute{
				Computed: true, PlanModifiers: keep,
				Description: "Docker image ID the nodes run. A rebuilt node image under the same name replaces the cluster, as make kind-up does.",
			},
			"kubeconfig": schema.StringAttribute{
				Computed: true, Sensitive: true, PlanModifiers: keep,
				Description: "Kubeconfig of the cluster's admin, for use from this host.",
			},
			"endpoint": schema.StringAttribute{
				Computed: true, PlanModifiers: keep,
				Description: "URL of the cluster's API server.",
			},
		},
	}
}

// spec returns the kindlab spec of m, which must hold known values.
func (m kindClusterModel) spec() kindlab.Spec {
	return kindlab.Spec{
		Name:          m.Name.ValueString(),
		NodeImage:     m.NodeImage.ValueString(),
		Workers:       int(m.Workers.ValueInt64()),
		PodSubnet:     m.PodSubnet.ValueString(),
		ServiceSubnet: m.ServiceSubnet.ValueString(),
	}
}

func (r *kindClusterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m kindClusterModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(validateKindCluster(m)...)
}

func (r *kindClusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return
	}
	var plan, state kindClusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || plan.NodeImage.IsUnknown() || state.NodeImageID.IsNull() {
		return
	}
	// A node image rebuilt under the same name is a different cluster.
	id, err := r.lab.ImageID(ctx, plan.NodeImage.ValueString())
	if err != nil || id == state.NodeImageID.ValueString() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("node_image_id"), id)...)
	resp.RequiresReplace = append(resp.RequiresReplace, path.Root("node_image_id"))
}

func (r *kindClusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m kindClusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	images, diags := stringList(ctx, m.LoadImages)
	resp.Diagnostics.Append(diags...)
	wait, err := time.ParseDuration(m.WaitTimeout.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("wait_timeout"), "Invalid duration", err.Error())
	}
	if resp.Diagnostics.HasError() {
		return
	}
	spec := m.spec()
	kubeconfig, err := r.lab.Create(ctx, spec, images, wait)
	if err != nil {
		resp.Diagnostics.AddError("Cannot create kind cluster "+spec.Name, err.Error())
		return
	}
	id, err := r.lab.NodeImageID(ctx, spec.Name)
	if err != nil {
		resp.Diagnostics.AddError("Cannot inspect kind cluster "+spec.Name, err.Error())
		return
	}
	m.ID = types.StringValue(spec.Name)
	m.NodeImageID = types.StringValue(id)
	resp.Diagnostics.Append(setKubeconfig(&m, kubeconfig)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *kindClusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m kindClusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.ID.ValueString()
	if err := r.lab.CheckDocker(ctx); err != nil {
		resp.Diagnostics.AddError("Cannot read kind cluster "+name, err.Error())
		return
	}
	exists, err := r.lab.Exists(name)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read kind cluster "+name, err.Error())
		return
	}
	if !exists {
		resp.State.RemoveResource(ctx)
		return
	}
	kubeconfig, err := r.lab.Kubeconfig(name)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read kind cluster "+name, err.Error())
		return
	}
	if id, err := r.lab.NodeImageID(ctx, name); err == nil {
		m.NodeImageID = types.StringValue(id)
	}
	m.Name = types.StringValue(name)
	resp.Diagnostics.Append(setKubeconfig(&m, kubeconfig)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *kindClusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state kindClusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	images, diags := stringList(ctx, plan.LoadImages)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.lab.LoadImages(ctx, state.ID.ValueString(), images); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("load_images"), "Cannot load images into kind cluster "+state.ID.ValueString(), err.Error())
		return
	}
	plan.ID, plan.NodeImageID, plan.Kubeconfig, plan.Endpoint = state.ID, state.NodeImageID, state.Kubeconfig, state.Endpoint
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *kindClusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m kindClusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.lab.CheckDocker(ctx); err != nil {
		resp.Diagnostics.AddError("Cannot delete kind cluster "+m.ID.ValueString(), err.Error())
		return
	}
	if err := r.lab.Delete(m.ID.ValueString()); err != nil {
		resp.Diagnostics.AddError("Cannot delete kind cluster "+m.ID.ValueString(), err.Error())
	}
}

// ImportState adopts an existing kind cluster by name. Attributes that
// cannot be read back keep their defaults; a cluster of another shape
// shows up as a replacement in the next plan.
func (r *kindClusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	name := req.ID
	if err := (kindlab.Spec{Name: name, NodeImage: "-", PodSubnet: kindlab.DefaultPodSubnet, ServiceSubnet: kindlab.DefaultServiceSubnet}).Validate(); err != nil {
		resp.Diagnostics.AddError("Invalid import ID", "the ID of a xilaguard_kind_cluster is the cluster name: "+err.Error())
		return
	}
	m := kindClusterModel{
		ID: types.StringValue(name), Name: types.StringValue(name),
		NodeImage:     types.StringValue(kindlab.DefaultNodeImage),
		Workers:       types.Int64Value(kindlab.DefaultWorkers),
		PodSubnet:     types.StringValue(kindlab.DefaultPodSubnet),
		ServiceSubnet: types.StringValue(kindlab.DefaultServiceSubnet),
		LoadImages:    types.ListNull(types.StringType),
		WaitTimeout:   types.StringValue(defaultClusterWait),
		NodeImageID:   types.StringNull(),
		Kubeconfig:    types.StringNull(),
		Endpoint:      types.StringNull(),
	}
	if nodes, err := r.lab.Workers(name); err == nil {
		m.Workers = types.Int64Value(int64(nodes))
	}
	if img, err := r.lab.NodeImageName(ctx, name); err == nil {
		m.NodeImage = types.StringValue(img)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func setKubeconfig(m *kindClusterModel, kubeconfig string) (diags diagnostics) {
	m.Kubeconfig = types.StringValue(kubeconfig)
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		diags.AddError("Invalid kubeconfig from kind", err.Error())
		return diags
	}
	m.Endpoint = types.StringValue(cfg.Host)
	return diags
}
