//go:build integration

package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Principals of the migration tests, as the API server authenticates
// them. Both hold only the rights RBAC gives them below (KubeVirt's own
// roles would give the controller the same), so that every refusal is
// the webhook's.
var (
	migrationTenant    = impersonated{"alice", []string{"acme-users", "system:authenticated"}}
	kubevirtController = impersonated{"system:serviceaccount:kubevirt:kubevirt-controller",
		[]string{"system:serviceaccounts", "system:serviceaccounts:kubevirt", "system:authenticated"}}
	migrationsGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstancemigrations"}
	vmisGVR       = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
)

// migrationJobUIDLabel is the label KubeVirt's controller puts on a
// migration's target pod.
const migrationJobUIDLabel = "kubevirt.io/migrationJobUID"

type impersonated struct {
	user   string
	groups []string
}

func (p impersonated) config() *rest.Config {
	c := rest.CopyConfig(restCfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: p.user, Groups: p.groups}
	return c
}

func (p impersonated) dynamic(t *testing.T) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(p.config())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (p impersonated) kube(t *testing.T) kubernetes.Interface {
	t.Helper()
	k, err := kubernetes.NewForConfig(p.config())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// installKubeVirtCRDs installs the KubeVirt CRDs generated from the
// pinned KubeVirt API module (kubevirt.io/client-go); no KubeVirt
// controller runs: the test plays KubeVirt's controller.
func installKubeVirtCRDs(t *testing.T) {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "gpudevices", "config", "kubevirt-crds")
	if _, err := envtest.InstallCRDs(restCfg, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("installing the KubeVirt CRDs: %v", err)
	}
}

// grantMigrationWrites gives the tenant what KubeVirt's aggregated
// kubevirt.io:edit role gives it, VMIs and migrations in its namespace,
// and KubeVirt's controller pods, as its ClusterRole does.
func grantMigrationWrites(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	rbac := kube.RbacV1()
	roles := []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "migration-test-tenant"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachineinstances", "virtualmachineinstancemigrations"},
			Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "migration-test-kubevirt"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}}},
	}
	for _, r := range roles {
		if _, err := rbac.ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), r.Name, metav1.DeleteOptions{}) })
	}
	tenantBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "migration-test-tenant", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "migration-test-tenant"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: migrationTenant.user}}}
	if _, err := rbac.RoleBindings(ns).Create(ctx, tenantBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.RoleBindings(ns).Delete(context.Background(), tenantBinding.Name, metav1.DeleteOptions{})
	})
	ctrlBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "migration-test-kubevirt"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "migration-test-kubevirt"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kubevirt", Name: "kubevirt-controller"}}}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, ctrlBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), ctrlBinding.Name, metav1.DeleteOptions{})
	})
}

// registerMigrations points a ValidatingWebhookConfiguration at w's
// /validate-migrations as the chart's xila-guard-migrations does
// (confidential.vmMigrations): KubeVirt's migrations, CREATE and UPDATE,
// in namespaces that carry the tenant label, failurePolicy Fail.
func registerMigrations(t *testing.T, w *webhook) {
	t.Helper()
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	scope := admissionregistrationv1.NamespacedScope
	timeout := int32(5)
	url := "https://" + w.addr + "/validate-migrations"
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "migrations"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "migrations.webhook.guard.xila.us",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.ca.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"kubevirt.io"}, APIVersions: []string{"*"},
					Resources: []string{"virtualmachineinstancemigrations"}, Scope: &scope},
			}},
			FailurePolicy:           &fail,
			MatchPolicy:             &equivalent,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: guard.LabelTenant, Operator: metav1.LabelSelectorOpExists}}},
		}},
	}
	createConfig(t, cfg)
}

// newMigration is a VirtualMachineInstanceMigration of VMI vmi in ns;
// sel is its spec.addedNodeSelector, nil for none.
func newMigration(ns, name, vmi string, sel map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"vmiName": vmi}
	if sel != nil {
		spec["addedNodeSelector"] = sel
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}

// TestIntegrationMigrations runs KubeVirt's migration of a protected VMI
// against the real API server with KubeVirt's CRDs, the test playing
// KubeVirt's controller: the migration is admitted only with its target
// constrained to the tenant's pool, and the target pod the controller
// then creates is a protected pod, kept on the controlled scheduler and
// bound only to a node whose evidence satisfies the tenant's policy.
func TestIntegrationMigrations(t *testing.T) {
	t.Run("G-MIGRATION-TARGET a migration and its target pod stay in the tenant's pool", testMigrations)
}

func testMigrations(t *testing.T) {
	installKubeVirtCRDs(t)
	w := mainWebhook(t)
	registerMigrations(t, w)
	// acme-faults is acme's and carries the tenant label, which routes it
	// to the webhook as the chart's selectors do.
	ns := faultsNS
	grantMigrationWrites(t, ns)
	ctx := t.Context()
	tenant := migrationTenant.dynamic(t).Resource(migrationsGVR)

	// Wait until the API server calls the migrations webhook.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := tenant.Namespace(ns).Create(ctx, newMigration(ns, "probe", "vm-1", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "xila-guard"), nil
	})
	if err != nil {
		t.Fatalf("the migrations webhook is not called for namespace %s: %v", ns, err)
	}

	vmi := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": "vm-1", "namespace": ns},
		"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}}},
	}}
	vmi, err = migrationTenant.dynamic(t).Resource(vmisGVR).Namespace(ns).Create(ctx, vmi, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the VMI: %v", err)
	}

	outside := guard.ReasonMigrationOutsidePool
	for _, tc := range []struct {
		name string
		ns   string
		sel  map[string]any
		want guard.Reason
	}{
		{"without a target constraint", ns, nil, outside},
		{"constrained to a host only", ns, map[string]any{corev1.LabelHostname: poolNode}, outside},
		{"constrained to another tenant's pool", ns, map[string]any{guard.LabelTenantPool: "beta"}, outside},
		{"in a namespace labelled for a tenant that no binding lists", forgedNS, map[string]any{guard.LabelTenantPool: "acme"}, guard.ReasonTenantUnresolved},
	} {
		// The tenant's user has no rights in the forged namespace: an
		// administrator tries there, and the webhook refuses anyway.
		c := tenant
		if tc.ns != ns {
			c = kube2dyn(t).Resource(migrationsGVR)
		}
		_, err := c.Namespace(tc.ns).Create(ctx, newMigration(tc.ns, "refused", "vm-1", tc.sel), metav1.CreateOptions{})
		expect(t, "migration "+tc.name, err, tc.want)
	}
	mig, err := tenant.Namespace(ns).Create(ctx, newMigration(ns, "mig-1", "vm-1",
		map[string]any{guard.LabelTenantPool: "acme", "kubevirt.io/schedulable": "true"}), metav1.CreateOptions{})
	expect(t, "migration constrained to the tenant's pool", err, "")
	if err != nil {
		t.FailNow()
	}
	// An update of its metadata passes; one that drops the constraint
	// does not.
	mig.SetLabels(map[string]string{"a": "b"})
	mig, err = tenant.Namespace(ns).Update(ctx, mig, metav1.UpdateOptions{})
	expect(t, "label update of the admitted migration", err, "")
	if err != nil {
		t.FailNow()
	}
	dropped := mig.DeepCopy()
	unstructured.RemoveNestedField(dropped.Object, "spec", "addedNodeSelector", guard.LabelTenantPool)
	_, err = tenant.Namespace(ns).Update(ctx, dropped, metav1.UpdateOptions{})
	expect(t, "update dropping the pool constraint", err, outside)

	// KubeVirt's controller creates the target pod: labelled with the
	// migration's UID, owned by the VMI, with the VMI's scheduler name and
	// the migration's addedNodeSelector.
	controller := kubevirtController.kube(t).CoreV1().Pods(ns)
	target := func(name, scheduler string) *corev1.Pod {
		return fixture.MakePod(name, ns).Scheduler(scheduler).Image("quay.io/kubevirt/virt-launcher:v1.7.0", "").
			Label("kubevirt.io", "virt-launcher").Label("kubevirt.io/created-by", string(vmi.GetUID())).
			Label(migrationJobUIDLabel, string(mig.GetUID())).
			ControlledBy("kubevirt.io/v1", "VirtualMachineInstance", vmi.GetName(), vmi.GetUID()).
			NodeSelector(guard.LabelTenantPool, "acme").NodeSelector("kubevirt.io/schedulable", "true").Obj()
	}
	_, err = controller.Create(ctx, target("virt-launcher-vm-1-dflt", corev1.DefaultSchedulerName), metav1.CreateOptions{})
	expect(t, "target pod for the default scheduler", err, guard.ReasonSchedulerNotAllowed)
	tp, err := controller.Create(ctx, target("virt-launcher-vm-1-xgs", guard.SchedulerName), metav1.CreateOptions{})
	expect(t, "target pod for the controlled scheduler", err, "")
	if err != nil {
		t.FailNow()
	}

	// Whoever binds it, the target pod goes only to a node of its pool
	// whose evidence satisfies the tenant's policy now.
	const scheduler = "system:serviceaccount:xila-guard-system:xila-guard-scheduler"
	beta := poolNodeWith(t, "mig-beta", "beta", v1alpha1.SharingExclusive)
	stale := poolNodeWith(t, "mig-stale", "acme", v1alpha1.SharingExclusive)
	setStaleState(t, stale)
	for _, tc := range []struct {
		name, user, node string
		want             guard.Reason
	}{
		{"by KubeVirt's controller", kubevirtController.user, poolNode, guard.ReasonBindingNotAllowed},
		{"to another tenant's pool node", scheduler, beta, guard.ReasonTenantMismatch},
		{"to a node of its pool with stale evidence", scheduler, stale, guard.ReasonEvidenceStale},
	} {
		var err error
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			err = bind(t, tc.user, ns, tp.Name, tc.node)
			return err == nil || fixture.RefusedWith(err, tc.want) == nil, nil
		})
		expect(t, "binding the target pod "+tc.name, err, tc.want)
	}
	expect(t, "binding the target pod to its pool's attested node", bind(t, scheduler, ns, tp.Name, poolNode), "")
	_ = kube.CoreV1().Pods(ns).Delete(context.Background(), tp.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	_ = kube2dyn(t).Resource(migrationsGVR).Namespace(ns).Delete(context.Background(), mig.GetName(), metav1.DeleteOptions{})
	_ = kube2dyn(t).Resource(vmisGVR).Namespace(ns).Delete(context.Background(), vmi.GetName(), metav1.DeleteOptions{})
}

// kube2dyn is a dynamic client with the test's administrator rights.
func kube2dyn(t *testing.T) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// setStaleState makes the node's attested evidence an hour old, beyond
// every policy's default evidence maxAge.
func setStaleState(t *testing.T, node string) {
	t.Helper()
	gc, err := guardClient()
	if err != nil {
		t.Fatal(err)
	}
	n, err := kube.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nss := &v1alpha1.NodeSecurityState{}
	if err := gc.Get().Resource("nodesecuritystates").Name(node).Do(t.Context()).Into(nss); err != nil {
		t.Fatal(err)
	}
	nss.Spec.NodeUID = n.UID
	nss.Spec.ObservedAt = metav1.NewTime(time.Now().Add(-time.Hour))
	if err := gc.Put().Resource("nodesecuritystates").Name(node).Body(nss).Do(t.Context()).Error(); err != nil {
		t.Fatal(err)
	}
}
