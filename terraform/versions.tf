terraform {
  required_version = ">= 1.5.0"

  required_providers {
    # Built from terraform/provider by make terraform-provider into a local
    # filesystem mirror; no registry is involved.
    xilaguard = {
      source  = "xila-guard/xilaguard"
      version = ">= 0.1.0"
    }
  }
}
