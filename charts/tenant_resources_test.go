package charts

import (
	"slices"
	"strings"
	"testing"
)

// clusterScopedKinds are the cluster-scoped kinds of the shipped
// orchestrators (the scope of their CRDs), as <resource>.<group>. A
// RoleBinding never grants them; a tenant role naming one is a mistake.
var clusterScopedKinds = []string{
	"queues.scheduling.volcano.sh", "hypernodes.topology.volcano.sh", "numatopologies.nodeinfo.volcano.sh",
	"nodeshards.shard.volcano.sh",
	"queues.scheduling.run.ai", "configs.kai.scheduler", "schedulingshards.kai.scheduler", "topologies.kai.scheduler",
	"clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io",
	"admissionchecks.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io", "topologies.kueue.x-k8s.io",
	"multikueueclusters.kueue.x-k8s.io", "multikueueconfigs.kueue.x-k8s.io", "provisioningrequestconfigs.kueue.x-k8s.io",
	"clusterqueues.visibility.kueue.x-k8s.io",
}

// reachingKinds are namespaced kinds that act past the tenant's namespace
// or choose a pod's node: a Volcano Command can target any Queue, a KAI
// BindRequest names the node its binder binds to.
var reachingKinds = []string{"commands.bus.volcano.sh", "bindrequests.scheduling.run.ai"}

// kubernetesGroup reports whether an API group is one of Kubernetes' own,
// which an integration's tenantResources never name.
func kubernetesGroup(g string) bool {
	return !strings.Contains(g, ".") || g == "k8s.io" || strings.HasSuffix(g, ".k8s.io")
}

// strs reads a list of strings of a decoded object.
func strs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// ruleBypasses lists what one rule of a tenant role grants that takes a
// tenant around the guard: a wildcard, the guard kinds, bindings, nodes,
// namespaces, DaemonSets (every node), cluster-scoped or reaching kinds of
// the orchestrators, or the verbs that escalate.
func ruleBypasses(rule any) []string {
	var out []string
	for _, v := range strs(field(rule, "verbs")) {
		if v == "*" || v == "escalate" || v == "bind" || v == "impersonate" {
			out = append(out, "verb "+v)
		}
	}
	for _, g := range strs(field(rule, "apiGroups")) {
		for _, r := range strs(field(rule, "resources")) {
			base, sub, _ := strings.Cut(r, "/")
			kind := base + "." + g
			switch {
			case g == "*" || r == "*":
				out = append(out, "a wildcard ("+r+" in "+g+")")
			case g == "guard.xila.us":
				out = append(out, "the guard kind "+kind)
			case sub == "binding" || base == "bindings" || base == "nodes" || base == "namespaces" || base == "daemonsets":
				out = append(out, r+" in "+g)
			case slices.Contains(clusterScopedKinds, kind):
				out = append(out, "the cluster-scoped "+kind)
			case slices.Contains(reachingKinds, kind):
				out = append(out, kind+", which reaches past the namespace")
			}
		}
	}
	return out
}

// tenantRoles returns the rendered tenant ClusterRoles by name.
func tenantRoles(objs []object) map[string]object {
	out := map[string]object{}
	for _, o := range objs {
		if o.Kind == "ClusterRole" && strings.HasPrefix(o.name(), "xila-guard-tenant") {
			out[o.name()] = o
		}
	}
	return out
}

// tenantBindings returns, per namespace, the roles its rendered tenant
// RoleBindings bind, sorted.
func tenantBindings(t *testing.T, objs []object) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, o := range objs {
		if o.Kind != "RoleBinding" {
			continue
		}
		role, _ := field(o.raw, "roleRef", "name").(string)
		if o.name() != role {
			t.Errorf("%s binds %s: want the binding named after its role", o, role)
		}
		ns := o.Metadata["namespace"].(string)
		out[ns] = append(out[ns], role)
		slices.Sort(out[ns])
	}
	return out
}

// tenantValues are tenant RBAC values with one tenant and the given
// integrations.
func tenantValues(enabled bool, integrations ...any) map[string]any {
	return map[string]any{
		"orchestratorIntegrations": integrations,
		"tenantRBAC": map[string]any{"enabled": enabled, "tenants": []any{map[string]any{
			"name": "acme", "namespaces": []any{"acme-train", "acme-serve"},
			"subjects": []any{map[string]any{"kind": "Group", "name": "acme-developers", "apiGroup": "rbac.authorization.k8s.io"}},
		}}},
	}
}

// integrationWith is a minimal integration with tenantResources rules.
func integrationWith(name string, enabled bool, rules ...any) map[string]any {
	return map[string]any{"name": name, "enabled": enabled, "schedulerName": name,
		"workloadSelector": map[string]any{"matchLabels": map[string]any{name + "/job": "x"}},
		"tenantResources":  rules}
}

func rule(groups, resources, verbs []any) map[string]any {
	return map[string]any{"apiGroups": groups, "resources": resources, "verbs": verbs}
}

var workloadVerbs = []any{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// TestTenantResourcesEnabledOnly: the tenantResources of enabled
// integrations render as a ClusterRole each, bound in every tenant
// namespace; a disabled integration, one with no tenantResources, or tenant
// RBAC off render none, and the base tenant role stays as it is.
func TestTenantResourcesEnabledOnly(t *testing.T) {
	jobs := rule([]any{"batch.example.com"}, []any{"jobs"}, workloadVerbs)
	groups := rule([]any{"scheduling.example.com"}, []any{"podgroups"}, []any{"get", "list", "watch"})
	base := toYAML(t, field(find(t, objects(t, mustRender(t, loadChart(t), tenantValues(true)).Manifest),
		"ClusterRole", "xila-guard-tenant").raw, "rules"))
	for _, tc := range []struct {
		name      string
		vals      map[string]any
		wantRoles map[string]string // role name -> rules, as YAML
	}{
		{"enabled, disabled and empty", tenantValues(true,
			integrationWith("vc", true, jobs, groups), integrationWith("kai", false, groups), integrationWith("yk", true)),
			map[string]string{"xila-guard-tenant": base, "xila-guard-tenant-vc": toYAML(t, []any{jobs, groups})}},
		{"two enabled", tenantValues(true, integrationWith("vc", true, jobs), integrationWith("kai", true, groups)),
			map[string]string{"xila-guard-tenant": base, "xila-guard-tenant-vc": toYAML(t, []any{jobs}),
				"xila-guard-tenant-kai": toYAML(t, []any{groups})}},
		{"tenant RBAC off", tenantValues(false, integrationWith("vc", true, jobs)), map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(t, mustRender(t, loadChart(t), tc.vals).Manifest)
			roles := tenantRoles(objs)
			var want []string
			for name, rules := range tc.wantRoles {
				want = append(want, name)
				role, ok := roles[name]
				if !ok {
					t.Errorf("no ClusterRole %s rendered", name)
					continue
				}
				if got := toYAML(t, field(role.raw, "rules")); got != rules {
					t.Errorf("%s rules:\n%s\nwant\n%s", role, got, rules)
				}
			}
			slices.Sort(want)
			for name := range roles {
				if !slices.Contains(want, name) {
					t.Errorf("ClusterRole %s rendered; want only %v", name, want)
				}
			}
			bound := tenantBindings(t, objs)
			for _, ns := range []string{"acme-train", "acme-serve"} {
				if len(want) == 0 {
					if len(bound[ns]) != 0 {
						t.Errorf("%s: RoleBindings to %v with tenant RBAC off", ns, bound[ns])
					}
					continue
				}
				if !slices.Equal(bound[ns], want) {
					t.Errorf("%s: RoleBindings to %v, want %v", ns, bound[ns], want)
				}
			}
			for _, o := range objs {
				if o.Kind == "RoleBinding" && toYAML(t, field(o.raw, "subjects")) != "- apiGroup: rbac.authorization.k8s.io\n  kind: Group\n  name: acme-developers" {
					t.Errorf("%s subjects %v: want the tenant's", o, field(o.raw, "subjects"))
				}
			}
		})
	}
}

// TestTenantResourcesRefuseBypass: a tenantResources rule that would take
// tenants around the guard stops the render with a message saying why,
// whether tenant RBAC is on or not and whether the integration is enabled.
func TestTenantResourcesRefuseBypass(t *testing.T) {
	read := []any{"get", "list", "watch"}
	for _, tc := range []struct {
		name string
		rule any
		want string
	}{
		{"pods/binding", rule([]any{""}, []any{"pods/binding"}, []any{"create"}), `API group "" is Kubernetes' own`},
		{"nodes", rule([]any{""}, []any{"nodes"}, []any{"patch"}), `API group "" is Kubernetes' own`},
		{"DaemonSets", rule([]any{"apps"}, []any{"daemonsets"}, workloadVerbs), `API group "apps" is Kubernetes' own`},
		{"RBAC", rule([]any{"rbac.authorization.k8s.io"}, []any{"roles"}, workloadVerbs), `"rbac.authorization.k8s.io" is Kubernetes' own`},
		{"guard kinds", rule([]any{"guard.xila.us"}, []any{"tenantbindings"}, read), "the guard kinds"},
		{"wildcard group", rule([]any{"*"}, []any{"jobs"}, read), "apiGroups"},
		{"wildcard resource", rule([]any{"batch.volcano.sh"}, []any{"*"}, read), "resources"},
		{"wildcard verb", rule([]any{"batch.volcano.sh"}, []any{"jobs"}, []any{"*"}), "verbs"},
		{"escalate", rule([]any{"batch.volcano.sh"}, []any{"jobs"}, []any{"escalate"}), "verbs"},
		{"resourceNames", map[string]any{"apiGroups": []any{"batch.volcano.sh"}, "resources": []any{"jobs"}, "verbs": read,
			"resourceNames": []any{"a"}}, "resourceNames"},
		{"binding subresource of a CRD", rule([]any{"example.com"}, []any{"things/binding"}, []any{"create"}),
			"bindings, nodes and namespaces are never granted"},
		{"nodes of a CRD group", rule([]any{"example.com"}, []any{"nodes"}, read), "bindings, nodes and namespaces are never granted"},
		{"Volcano Queues", rule([]any{"scheduling.volcano.sh"}, []any{"queues"}, read), "queues.scheduling.volcano.sh is never granted to tenants: Volcano's Queues are cluster-scoped"},
		{"Volcano Commands", rule([]any{"bus.volcano.sh"}, []any{"commands"}, []any{"create"}), "commands.bus.volcano.sh is never granted to tenants"},
		{"Volcano HyperNodes", rule([]any{"topology.volcano.sh"}, []any{"hypernodes"}, read), "cluster-scoped"},
		{"KAI BindRequests", rule([]any{"scheduling.run.ai"}, []any{"bindrequests"}, []any{"create"}), "bindrequests.scheduling.run.ai is never granted"},
		{"KAI Queues", rule([]any{"scheduling.run.ai"}, []any{"queues"}, read), "queues.scheduling.run.ai is never granted"},
		{"KAI PodGroups written", rule([]any{"scheduling.run.ai"}, []any{"podgroups"}, []any{"create"}), "podgroups.scheduling.run.ai is read-only"},
		{"Kueue ClusterQueues", rule([]any{"kueue.x-k8s.io"}, []any{"clusterqueues"}, read), "clusterqueues.kueue.x-k8s.io is never granted"},
		{"Kueue ResourceFlavors", rule([]any{"kueue.x-k8s.io"}, []any{"resourceflavors"}, read), "resourceflavors.kueue.x-k8s.io is never granted"},
		{"Kueue Workloads written", rule([]any{"kueue.x-k8s.io"}, []any{"workloads"}, []any{"create"}), "workloads.kueue.x-k8s.io is read-only"},
		{"Kueue LocalQueues written", rule([]any{"kueue.x-k8s.io"}, []any{"localqueues"}, []any{"update"}), "localqueues.kueue.x-k8s.io is read-only"},
		{"second group of a rule", rule([]any{"batch.volcano.sh", "scheduling.volcano.sh"}, []any{"jobs", "queues"}, read), "queues.scheduling.volcano.sh"},
		{"empty resources", rule([]any{"batch.volcano.sh"}, []any{}, read), "resources"},
	} {
		for _, variant := range []struct {
			name string
			vals map[string]any
		}{
			{"tenant RBAC on", tenantValues(true, integrationWith("vc", true, tc.rule))},
			{"tenant RBAC off", tenantValues(false, integrationWith("vc", true, tc.rule))},
			{"integration disabled", tenantValues(true, integrationWith("vc", false, tc.rule))},
		} {
			t.Run("G-TENANT-RESOURCES "+tc.name+"/"+variant.name, func(t *testing.T) {
				_, err := render(loadChart(t), variant.vals)
				if err == nil {
					t.Fatal("the chart rendered; want an error")
				}
				if !strings.Contains(err.Error(), "tenantResources") || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q does not name tenantResources and %q", err, tc.want)
				}
			})
		}
	}
}
