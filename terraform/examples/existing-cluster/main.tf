# The platform on a cluster that already exists, reached through a
# kubeconfig file. Component images must be pullable by its nodes
# (image_registry / image_tag).

terraform {
  required_version = ">= 1.5.0"
  required_providers {
    xilaguard = {
      source = "xila-guard/xilaguard"
    }
  }
}

variable "kubeconfig_path" {
  description = "Kubeconfig file of the target cluster."
  type        = string
}

variable "kube_context" {
  description = "Context in the kubeconfig; its current context when null."
  type        = string
  default     = null
}

variable "image_registry" {
  description = "Registry (and path) the nodes pull component images from: <registry>/<component>:<tag>."
  type        = string
  default     = "xila-guard"
}

variable "image_tag" {
  description = "Tag of the component images. Null uses the chart's appVersion."
  type        = string
  default     = null
}

variable "features" {
  description = "Feature switches by chart section, for example { enforcement = true }."
  type        = map(bool)
  default     = {}
}

variable "orchestrator_profiles" {
  description = "Orchestrator profiles to enable (files of profiles/ without .yaml)."
  type        = list(string)
  default     = []
}

module "xila_guard" {
  source = "../.."

  kubeconfig_path       = var.kubeconfig_path
  kube_context          = var.kube_context
  image_tag             = var.image_tag
  features              = var.features
  orchestrator_profiles = var.orchestrator_profiles
  values = {
    image = { registry = var.image_registry, pullPolicy = "IfNotPresent" }
  }
}

output "release" {
  description = "The platform release."
  value       = module.xila_guard.release
}
