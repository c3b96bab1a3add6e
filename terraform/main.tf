locals {
  chart_path   = coalesce(var.chart_path, "${path.module}/../charts/xila-guard")
  profiles_dir = coalesce(var.profiles_dir, "${path.module}/../profiles")
  crds_dir     = var.install_crds ? coalesce(var.crds_dir, "${path.module}/../components/api/config/crd") : null
  # image.tag joins the caller's values only when image_tag is set.
  values = merge(
    var.values,
    var.image_tag == null ? {} : {
      image = merge(lookup(var.values, "image", {}), { tag = var.image_tag })
    },
  )
}

resource "xilaguard_kind_cluster" "lab" {
  count = var.create_kind_cluster ? 1 : 0

  name        = var.cluster_name
  node_image  = var.node_image
  workers     = var.workers
  load_images = var.load_images
}

resource "xilaguard_platform" "this" {
  kubeconfig      = var.create_kind_cluster ? one(xilaguard_kind_cluster.lab[*].kubeconfig) : var.kubeconfig
  kubeconfig_path = var.create_kind_cluster ? null : var.kubeconfig_path
  kube_context    = var.kube_context

  chart_path            = local.chart_path
  profiles_dir          = local.profiles_dir
  crds_dir              = local.crds_dir
  release_name          = var.release_name
  namespace             = var.namespace
  values                = length(local.values) == 0 ? null : yamlencode(local.values)
  features              = var.features
  orchestrator_profiles = var.orchestrator_profiles
  timeout               = var.timeout

  lifecycle {
    precondition {
      condition     = var.create_kind_cluster || (var.kubeconfig == null) != (var.kubeconfig_path == null)
      error_message = "Without create_kind_cluster, set exactly one of kubeconfig and kubeconfig_path."
    }
  }
}
