{{/* Kinds of the orchestrators' API groups that an integration's
     tenantResources never grant, keyed <resource>.<group>, with the reason
     a refused render gives. refused: any verb; readOnly: anything but get,
     list and watch. The tenant role is bound by RoleBindings, which never
     grant cluster-scoped kinds in the first place; naming one here is a
     mistake, and the render says so instead of rendering a dead rule. */}}
{{- define "xila-guard.tenantResources.limits" -}}
refused:
  queues.scheduling.volcano.sh: Volcano's Queues are cluster-scoped and belong to administrators
  commands.bus.volcano.sh: Volcano's queue controller acts on a Command in any namespace whose target is a Queue (feature gate QueueCommandSync, on by default), so a tenant who may create Commands opens and closes every team's queue
  hypernodes.topology.volcano.sh: Volcano's HyperNodes are cluster-scoped network topology
  numatopologies.nodeinfo.volcano.sh: Volcano's Numatopologies are cluster-scoped facts of nodes
  nodeshards.shard.volcano.sh: Volcano's NodeShards are cluster-scoped scheduler configuration
  queues.scheduling.run.ai: KAI's and run:ai's Queues are cluster-scoped and belong to administrators
  bindrequests.scheduling.run.ai: a BindRequest tells KAI's binder which node to bind a pod to; only the scheduler writes them
  configs.kai.scheduler: KAI's configuration is cluster-scoped
  schedulingshards.kai.scheduler: KAI's SchedulingShards are cluster-scoped
  topologies.kai.scheduler: KAI's Topologies are cluster-scoped
  clusterqueues.kueue.x-k8s.io: Kueue's ClusterQueues are cluster-scoped and belong to batch administrators
  cohorts.kueue.x-k8s.io: Kueue's Cohorts are cluster-scoped
  resourceflavors.kueue.x-k8s.io: Kueue's ResourceFlavors are cluster-scoped and choose the nodes of admitted workloads
  admissionchecks.kueue.x-k8s.io: Kueue's AdmissionChecks are cluster-scoped
  workloadpriorityclasses.kueue.x-k8s.io: Kueue's WorkloadPriorityClasses are cluster-scoped
  topologies.kueue.x-k8s.io: Kueue's Topologies are cluster-scoped
  multikueueclusters.kueue.x-k8s.io: Kueue's MultiKueueClusters are cluster-scoped
  multikueueconfigs.kueue.x-k8s.io: Kueue's MultiKueueConfigs are cluster-scoped
  provisioningrequestconfigs.kueue.x-k8s.io: Kueue's ProvisioningRequestConfigs are cluster-scoped
  clusterqueues.visibility.kueue.x-k8s.io: Kueue's ClusterQueues are cluster-scoped
readOnly:
  workloads.kueue.x-k8s.io: Kueue creates and updates a job's Workload itself; tenants create the job
  localqueues.kueue.x-k8s.io: a LocalQueue names the ClusterQueue whose quota it spends, so batch administrators create them
  podgroups.scheduling.run.ai: KAI's pod grouper creates a workload's PodGroup itself
{{- end }}

{{/* Fails, saying why, unless the tenantResources of an integration are
     rules a tenant may hold in its own namespaces: only the
     orchestrator's own API groups (never Kubernetes' groups, whose kinds
     the xila-guard-tenant role already grants as far as tenants may have
     them, nor guard.xila.us), no wildcard, no bindings or nodes, none of
     the kinds above, and the verbs of workloads only:
     $_ := include "xila-guard.tenantResources.check" (list $name $rules) */}}
{{- define "xila-guard.tenantResources.check" -}}
{{- $name := index . 0 -}}
{{- $rules := index . 1 -}}
{{- $limits := include "xila-guard.tenantResources.limits" . | fromYaml -}}
{{- $verbs := list "get" "list" "watch" "create" "update" "patch" "delete" "deletecollection" -}}
{{- $readVerbs := list "get" "list" "watch" -}}
{{- if not (kindIs "slice" $rules) -}}
{{- fail (printf "orchestratorIntegrations %q: tenantResources: want a list of rules (apiGroups, resources, verbs)" $name) -}}
{{- end -}}
{{- range $j, $rule := $rules -}}
{{- $at := printf "orchestratorIntegrations %q: tenantResources[%d]" $name $j -}}
{{- if not (kindIs "map" $rule) -}}
{{- fail (printf "%s: want a rule with apiGroups, resources and verbs" $at) -}}
{{- end -}}
{{- range $key, $_ := $rule -}}
{{- if not (has $key (list "apiGroups" "resources" "verbs")) -}}
{{- fail (printf "%s: %s is not allowed: a rule has apiGroups, resources and verbs only" $at $key) -}}
{{- end -}}
{{- end -}}
{{- range $key := list "apiGroups" "resources" "verbs" -}}
{{- $v := get $rule $key -}}
{{- if not (and (kindIs "slice" $v) $v) -}}
{{- fail (printf "%s: %s: want a non-empty list" $at $key) -}}
{{- end -}}
{{- end -}}
{{- $writes := false -}}
{{- range $v := $rule.verbs -}}
{{- if not (has (toString $v) $verbs) -}}
{{- fail (printf "%s: verb %q is never granted to tenants; use some of %s" $at (toString $v) (join ", " $verbs)) -}}
{{- end -}}
{{- if not (has (toString $v) $readVerbs) -}}
{{- $writes = true -}}
{{- end -}}
{{- end -}}
{{- range $g := $rule.apiGroups -}}
{{- $g = toString $g -}}
{{- if contains "*" $g -}}
{{- fail (printf "%s: API group %q: wildcards are never granted to tenants" $at $g) -}}
{{- end -}}
{{- if or (eq $g "guard.xila.us") (hasSuffix ".xila.us" $g) -}}
{{- fail (printf "%s: API group %q: the guard kinds (PlacementPolicy, TenantBinding, NodeSecurityState) are administrators' only; tenants can read or write none of them" $at $g) -}}
{{- end -}}
{{- if or (eq $g "") (not (contains "." $g)) (eq $g "k8s.io") (hasSuffix ".k8s.io" $g) -}}
{{- fail (printf "%s: API group %q is Kubernetes' own: an integration grants its orchestrator's API groups only. The xila-guard-tenant role already grants the built-in workload kinds tenants need, and never pods/binding, nodes, namespaces or anything cluster-scoped" $at $g) -}}
{{- end -}}
{{- range $r := $rule.resources -}}
{{- $r = toString $r -}}
{{- if contains "*" $r -}}
{{- fail (printf "%s: resource %q: wildcards are never granted to tenants" $at $r) -}}
{{- end -}}
{{- $parts := splitList "/" $r -}}
{{- $base := first $parts -}}
{{- if or (has $base (list "bindings" "nodes" "namespaces")) (and (gt (len $parts) 1) (eq (last $parts) "binding")) -}}
{{- fail (printf "%s: resource %q in %s: bindings, nodes and namespaces are never granted to tenants" $at $r $g) -}}
{{- end -}}
{{- $kind := printf "%s.%s" $base $g -}}
{{- with get $limits.refused $kind -}}
{{- fail (printf "%s: %s is never granted to tenants: %s" $at $kind .) -}}
{{- end -}}
{{- if $writes -}}
{{- with get $limits.readOnly $kind -}}
{{- fail (printf "%s: %s is read-only for tenants (get, list, watch): %s" $at $kind .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}
