// Command terraform-provider-xilaguard is the Terraform provider of Xila
// Guard: a lab kind cluster with the project's pod networking, and the
// platform chart installed through the Helm library.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/xila-guard/xila-guard/terraform/provider/internal/provider"
)

// version is stamped by make terraform-provider.
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers such as delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: provider.Address,
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
