output "kubeconfig" {
  description = "Kubeconfig of the lab cluster (create_kind_cluster only)."
  value       = one(xilaguard_kind_cluster.lab[*].kubeconfig)
  sensitive   = true
}

output "endpoint" {
  description = "API server URL of the lab cluster (create_kind_cluster only)."
  value       = one(xilaguard_kind_cluster.lab[*].endpoint)
}

output "cluster_name" {
  description = "Name of the lab kind cluster (create_kind_cluster only)."
  value       = one(xilaguard_kind_cluster.lab[*].name)
}

output "release" {
  description = "The platform release: namespace, name, chart version, Helm revision and status."
  value = {
    namespace     = xilaguard_platform.this.namespace
    name          = xilaguard_platform.this.release_name
    chart_version = xilaguard_platform.this.chart_version
    revision      = xilaguard_platform.this.revision
    status        = xilaguard_platform.this.status
  }
}

output "orchestrator_profiles" {
  description = "Orchestrator profiles the platform has enabled."
  value       = var.orchestrator_profiles
}
