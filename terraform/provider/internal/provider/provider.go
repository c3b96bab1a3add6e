// Package provider is the Terraform provider of Xila Guard, built on the
// terraform-plugin-framework: the xilaguard_kind_cluster and
// xilaguard_platform resources.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// Address is the provider's source address. The provider is never
// published to a registry; make terraform-provider installs it into a
// local filesystem mirror under this address.
const Address = "registry.terraform.io/xila-guard/xilaguard"

// xilaGuardProvider has no configuration: each resource says which cluster
// it acts on.
type xilaGuardProvider struct {
	version string
}

var _ provider.Provider = &xilaGuardProvider{}

// New returns the provider factory for providerserver.Serve.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &xilaGuardProvider{version: version} }
}

func (p *xilaGuardProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "xilaguard"
	resp.Version = p.version
}

func (p *xilaGuardProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Provisions Xila Guard: a lab kind cluster built from the offline node image, and the xila-guard platform chart on any cluster.",
	}
}

func (p *xilaGuardProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *xilaGuardProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{NewKindClusterResource, NewPlatformResource}
}

func (p *xilaGuardProvider) DataSources(context.Context) []func() datasource.DataSource {
	return nil
}
