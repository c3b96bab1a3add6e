//go:build integration

package charts

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

// access is one request a tenant user may or may not make: a verb on a
// resource (with its subresource after a slash) of a group, in a
// namespace ("" for cluster scope).
type access struct {
	verb, group, resource, namespace string
	allowed                          bool
}

func (a access) String() string {
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	group := a.group
	if group == "" {
		group = "core"
	}
	return a.verb + " " + a.resource + " (" + group + ") " + where
}

// TestIntegrationTenantResources applies the tenant roles and bindings the
// chart renders, with every shipped profile enabled, to a real API server,
// and asks its authorizer from a tenant user's seat (impersonated,
// SelfSubjectAccessReview) for each grant of the profiles' tenantResources
// and for what stays refused: other namespaces, the orchestrators'
// cluster-scoped and admin-owned kinds, bindings, nodes and the guard
// kinds.
func TestIntegrationTenantResources(t *testing.T) {
	t.Run("G-TENANT-RESOURCES a tenant user's grants and refusals", testTenantResources)
}

func testTenantResources(t *testing.T) {
	ctx := t.Context()
	profiles := readProfiles(t)
	var integrations []any
	for _, name := range slices.Sorted(maps.Keys(profiles)) {
		integrations = append(integrations, profiles[name].Integration)
	}
	const tenantNS, otherNS = "acme-train", "beta-train"
	vals := map[string]any{
		"orchestratorIntegrations": integrations,
		"tenantRBAC": map[string]any{"enabled": true, "tenants": []any{map[string]any{
			"name": "acme", "namespaces": []any{tenantNS},
			"subjects": []any{map[string]any{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}},
		}}},
	}
	for _, ns := range []string{tenantNS, otherNS} {
		err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	var applied []*unstructured.Unstructured
	for _, o := range objects(t, mustRender(t, loadChart(t), vals).Manifest) {
		if (o.Kind != "ClusterRole" && o.Kind != "RoleBinding") || !strings.HasPrefix(o.name(), "xila-guard-tenant") {
			continue
		}
		u := &unstructured.Unstructured{Object: o.raw}
		recreate(t, u)
		applied = append(applied, u)
	}
	if len(applied) < 2 {
		t.Fatalf("applied %d tenant roles and bindings, want the base role and the profiles'", len(applied))
	}
	t.Cleanup(func() {
		for _, u := range applied {
			_ = env.Client.Delete(context.Background(), u)
		}
	})

	alice := principal{"alice", []string{"system:authenticated"}}.client(t)
	ask := func(ctx context.Context, a access) (bool, error) {
		resource, sub, _ := strings.Cut(a.resource, "/")
		r, err := alice.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.namespace, Verb: a.verb, Group: a.group, Resource: resource, Subresource: sub,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	}
	// The RBAC authorizer follows the bindings by watch: wait until the
	// first grant holds.
	first := access{"create", "batch.volcano.sh", "jobs", tenantNS, true}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		ok, err := ask(ctx, first)
		last = err
		return ok, nil
	}); err != nil {
		t.Fatalf("%s never allowed: %v (last error: %v)", first, err, last)
	}

	for _, a := range []access{
		// Volcano: Jobs, CronJobs, JobFlows, JobTemplates; PodGroups read.
		{"create", "batch.volcano.sh", "jobs", tenantNS, true},
		{"delete", "batch.volcano.sh", "cronjobs", tenantNS, true},
		{"create", "flow.volcano.sh", "jobflows", tenantNS, true},
		{"update", "flow.volcano.sh", "jobtemplates", tenantNS, true},
		{"watch", "scheduling.volcano.sh", "podgroups", tenantNS, true},
		{"create", "scheduling.volcano.sh", "podgroups", tenantNS, false},
		{"create", "batch.volcano.sh", "jobs", otherNS, false},
		{"list", "batch.volcano.sh", "jobs", "", false},
		{"create", "scheduling.volcano.sh", "queues", "", false},
		{"get", "scheduling.volcano.sh", "queues", "", false},
		{"create", "bus.volcano.sh", "commands", tenantNS, false},
		{"get", "topology.volcano.sh", "hypernodes", "", false},
		// run:ai and KAI: run:ai's workloads; PodGroups read; never
		// BindRequests or Queues.
		{"create", "run.ai", "trainingworkloads", tenantNS, true},
		{"delete", "run.ai", "inferenceworkloads", tenantNS, true},
		{"list", "scheduling.run.ai", "podgroups", tenantNS, true},
		{"create", "scheduling.run.ai", "podgroups", tenantNS, false},
		{"create", "scheduling.run.ai", "bindrequests", tenantNS, false},
		{"get", "scheduling.run.ai", "queues", "", false},
		{"create", "run.ai", "trainingworkloads", otherNS, false},
		// Kueue: batch Jobs (the base role), LocalQueues, Workloads and
		// pending workloads read.
		{"create", "batch", "jobs", tenantNS, true},
		{"get", "kueue.x-k8s.io", "localqueues", tenantNS, true},
		{"get", "kueue.x-k8s.io", "workloads/status", tenantNS, true},
		{"get", "visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", tenantNS, true},
		{"create", "kueue.x-k8s.io", "workloads", tenantNS, false},
		{"update", "kueue.x-k8s.io", "localqueues", tenantNS, false},
		{"list", "kueue.x-k8s.io", "clusterqueues", "", false},
		{"update", "kueue.x-k8s.io", "resourceflavors", "", false},
		{"get", "visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", "", false},
		// What no tenant grant reaches.
		{"create", "", "pods/binding", tenantNS, false},
		{"create", "", "bindings", tenantNS, false},
		{"patch", "", "nodes", "", false},
		{"create", "apps", "daemonsets", tenantNS, false},
		{"get", "guard.xila.us", "tenantbindings", "", false},
		{"list", "guard.xila.us", "nodesecuritystates", "", false},
	} {
		got, err := ask(ctx, a)
		switch {
		case err != nil:
			t.Errorf("%s: %v", a, err)
		case got != a.allowed:
			want := "refused"
			if a.allowed {
				want = "allowed"
			}
			t.Errorf("alice may %s: %v, want %s", a, got, want)
		}
	}
}
