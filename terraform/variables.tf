variable "create_kind_cluster" {
  description = "Create a lab kind cluster (xilaguard_kind_cluster) and install the platform on it. When false, kubeconfig or kubeconfig_path names an existing cluster."
  type        = bool
  default     = false
}

variable "cluster_name" {
  description = "Name of the lab kind cluster (create_kind_cluster only); its nodes are <name>-control-plane, <name>-worker, ..."
  type        = string
  default     = "xila-guard"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$", var.cluster_name))
    error_message = "cluster_name must be 1-32 lower-case letters, digits or '-', starting and ending with a letter or digit."
  }
}

variable "node_image" {
  description = "Node image of the lab cluster. Null uses the provider's default, the offline image make kind-image builds."
  type        = string
  default     = null
}

variable "workers" {
  description = "Worker nodes of the lab cluster."
  type        = number
  default     = 2

  validation {
    condition     = var.workers >= 0 && var.workers <= 10 && floor(var.workers) == var.workers
    error_message = "workers must be a whole number from 0 to 10."
  }
}

variable "load_images" {
  description = "Local Docker images loaded into every node of the lab cluster (the component images, xila-guard/<component>:<tag>)."
  type        = list(string)
  default     = []
}

variable "kubeconfig" {
  description = "Kubeconfig content of an existing cluster (create_kind_cluster = false)."
  type        = string
  default     = null
  sensitive   = true
}

variable "kubeconfig_path" {
  description = "Path of a kubeconfig file of an existing cluster (create_kind_cluster = false)."
  type        = string
  default     = null
}

variable "kube_context" {
  description = "Context of the kubeconfig to use; its current context when null."
  type        = string
  default     = null
}

variable "chart_path" {
  description = "The xila-guard chart. Null uses charts/xila-guard of this repository."
  type        = string
  default     = null
}

variable "profiles_dir" {
  description = "Directory of orchestrator profiles. Null uses profiles/ of this repository."
  type        = string
  default     = null
}

variable "install_crds" {
  description = "Apply the guard kinds' CustomResourceDefinitions (PlacementPolicy, TenantBinding, NodeSecurityState) before the release. They stay on destroy. False when the CRDs are managed elsewhere."
  type        = bool
  default     = true
}

variable "crds_dir" {
  description = "Directory of the CRDs (install_crds only). Null uses components/api/config/crd of this repository."
  type        = string
  default     = null
}

variable "release_name" {
  description = "Helm release name of the platform."
  type        = string
  default     = "xila-guard"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$", var.release_name))
    error_message = "release_name must be at most 53 lower-case letters, digits or '-', starting and ending with a letter or digit."
  }
}

variable "namespace" {
  description = "Namespace of the platform release; created when missing."
  type        = string
  default     = "xila-guard-system"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.namespace))
    error_message = "namespace must be a DNS label."
  }
}

variable "image_tag" {
  description = "Tag of the component images (make images tags them with git describe). Null keeps the chart's default, its appVersion."
  type        = string
  default     = null
}

variable "features" {
  description = "Feature switches by chart section, for example { enforcement = true }. Unset features keep the chart's default (off)."
  type        = map(bool)
  default     = {}
}

variable "orchestrator_profiles" {
  description = "Orchestrator profiles by name (files of profiles_dir without .yaml), each enabled as an orchestratorIntegrations entry."
  type        = list(string)
  default     = []

  validation {
    condition     = length(distinct(var.orchestrator_profiles)) == length(var.orchestrator_profiles)
    error_message = "orchestrator_profiles must not list a profile twice."
  }
}

variable "values" {
  description = "Further chart values, as an HCL object (written to YAML for Helm); checked against the chart's values.schema.json at plan time."
  type        = any
  default     = {}
}

variable "timeout" {
  description = "How long an install, upgrade or uninstall may wait for the platform's workloads, as a Go duration."
  type        = string
  default     = "5m"

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$", var.timeout))
    error_message = "timeout must be a Go duration such as 90s or 5m."
  }
}
