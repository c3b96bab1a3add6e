# A lab on this machine: a three-node kind cluster from the offline node
# image, with the platform's enforcement (lab profile: mock evidence is
# accepted as simulated integration) and two orchestrator integrations.

terraform {
  required_version = ">= 1.5.0"
  required_providers {
    xilaguard = {
      source = "xila-guard/xilaguard"
    }
  }
}

variable "cluster_name" {
  description = "Name of the lab kind cluster."
  type        = string
  default     = "xila-guard-lab"
}

variable "image_tag" {
  description = "Tag of the component images built by make images (git describe --tags --always --dirty)."
  type        = string

  validation {
    condition     = length(var.image_tag) > 0
    error_message = "image_tag must name the tag make images built, for example $(git describe --tags --always --dirty)."
  }
}

variable "orchestrator_profiles" {
  description = "Orchestrator profiles to enable (files of profiles/ without .yaml)."
  type        = list(string)
  default     = ["volcano", "kai"]
}

locals {
  # The images the enabled features run; each is loaded into every node.
  components = ["scheduler", "webhook"]
}

module "xila_guard" {
  source = "../.."

  create_kind_cluster = true
  cluster_name        = var.cluster_name
  image_tag           = var.image_tag
  load_images         = [for c in local.components : "xila-guard/${c}:${var.image_tag}"]

  features              = { enforcement = true }
  orchestrator_profiles = var.orchestrator_profiles
  values = {
    enforcement = { profile = "lab" }
    webhook     = { replicas = 1 }
  }
}

output "kubeconfig" {
  description = "Kubeconfig of the lab cluster: terraform output -raw kubeconfig > lab.kubeconfig"
  value       = module.xila_guard.kubeconfig
  sensitive   = true
}

output "endpoint" {
  description = "API server URL of the lab cluster."
  value       = module.xila_guard.endpoint
}

output "cluster_name" {
  description = "Name of the lab kind cluster."
  value       = module.xila_guard.cluster_name
}

output "release" {
  description = "The platform release."
  value       = module.xila_guard.release
}

output "orchestrator_profiles" {
  description = "Orchestrator profiles enabled."
  value       = module.xila_guard.orchestrator_profiles
}
