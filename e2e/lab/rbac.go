package lab

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// As returns clients that act as user, through impersonation by the
// cluster administrator: the API server authorizes every request as that
// user, exactly as if the user had sent it.
func (c *Cluster) As(user string, groups ...string) (kubernetes.Interface, dynamic.Interface, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return kube, dyn, nil
}

// TenantRBACValues are the chart values that give user the tenant role in
// the tenant's namespace.
func TenantRBACValues(tenant, user string) map[string]any {
	return map[string]any{"tenantRBAC": map[string]any{"enabled": true, "tenants": []any{map[string]any{
		"name": tenant, "namespaces": []any{tenant},
		"subjects": []any{map[string]any{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}},
	}}}}
}

// Access is one request of the tenant RBAC matrix and what came of it.
type Access struct {
	Action      string
	WantAllowed bool
	Allowed     bool
	Err         error // the error of a refused request
}

// OK reports whether the request went as the matrix wants. A refusal
// counts only when the authorizer gave it.
func (a Access) OK() bool {
	if a.WantAllowed {
		return a.Allowed
	}
	return !a.Allowed && RBACDenial(a.Err)
}

func (a Access) String() string {
	got := "ALLOWED"
	if !a.Allowed {
		got = "DENIED"
		if !RBACDenial(a.Err) {
			got = fmt.Sprintf("FAILED (%v)", a.Err)
		}
	}
	return a.Action + " " + got
}

// TenantRBACMatrix sends, as user, the requests tenant RBAC must allow and
// those it must refuse, and reports each. The tenant's namespace and the
// workers must exist; the pod it creates is deleted again.
func (c *Cluster) TenantRBACMatrix(ctx context.Context, t *Tenant, user string) ([]Access, error) {
	kube, dyn, err := c.As(user)
	if err != nil {
		return nil, err
	}
	ns := t.Name
	var out []Access
	try := func(action string, wantAllowed bool, err error) {
		out = append(out, Access{Action: action, WantAllowed: wantAllowed, Allowed: err == nil, Err: err})
	}
	pod := c.Pod("rbac-probe")
	_, err = kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	try("create pods in "+ns, true, err)
	_, err = kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	try("list pods in "+ns, true, err)
	_, err = kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	try("list deployments in "+ns, true, err)
	// Workloads are created as dry runs: authorized and admitted exactly
	// as real ones, and nothing is left to schedule or clean up.
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	zero := int32(0)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rbac-probe"}}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector.MatchLabels}, Spec: pod.Spec}
	_, err = kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe"},
		Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: selector, Template: template}}, dryRun)
	try("create deployments in "+ns, true, err)
	jobTemplate := *template.DeepCopy()
	jobTemplate.Spec.RestartPolicy = corev1.RestartPolicyNever
	_, err = kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe"},
		Spec: batchv1.JobSpec{Template: jobTemplate}}, dryRun)
	try("create jobs in "+ns, true, err)

	for _, gvr := range []schema.GroupVersionResource{Policies, Bindings, States} {
		_, err = dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		try("list "+gvr.Resource, false, err)
	}
	w, err := dyn.Resource(States).Watch(ctx, metav1.ListOptions{})
	if err == nil {
		w.Stop()
	}
	try("watch nodesecuritystates", false, err)
	lax, err := fixture.ToUnstructured(fixture.MakePlacementPolicy(t.Name+"-lax", v1alpha1.SourceMock).Obj())
	if err != nil {
		return nil, err
	}
	_, err = dyn.Resource(Policies).Create(ctx, lax, dryRun)
	try("create placementpolicy", false, err)
	err = dyn.Resource(Bindings).Delete(ctx, t.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	try("delete tenantbinding "+t.Name, false, err)
	_, err = dyn.Resource(Policies).Get(ctx, t.Name, metav1.GetOptions{})
	try("get placementpolicy "+t.Name, false, err)
	_, err = dyn.Resource(Bindings).Get(ctx, t.Name, metav1.GetOptions{})
	try("get tenantbinding "+t.Name, false, err)
	relax := []byte(`{"spec":{"gpuSharing":{"forbiddenModes":[]}}}`)
	_, err = dyn.Resource(Policies).Patch(ctx, t.Name, types.MergePatchType, relax, metav1.PatchOptions{})
	try("patch placementpolicy "+t.Name, false, err)
	_, err = dyn.Resource(Bindings).Patch(ctx, t.Name, types.MergePatchType, []byte(`{"spec":{"namespaces":["default"]}}`), metav1.PatchOptions{})
	try("patch tenantbinding "+t.Name, false, err)
	_, err = dyn.Resource(States).Patch(ctx, t.Workers[TimeSlicedWorker], types.MergePatchType,
		[]byte(`{"spec":{"devices":[{"id":"gpu-0","vendor":"nvidia","sharingMode":"Exclusive"}]}}`), metav1.PatchOptions{})
	try("patch nodesecuritystate "+t.Workers[TimeSlicedWorker], false, err)
	// Status and reports: no decision reads them, and the tenant writes
	// none. Authorization comes before the API server looks the resource
	// up, so PolicyReports are refused whether or not their CRD exists.
	ready := []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"EvidenceCurrent","message":"forged","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
	_, err = dyn.Resource(States).Patch(ctx, t.Workers[TimeSlicedWorker], types.MergePatchType, ready, metav1.PatchOptions{}, "status")
	try("patch nodesecuritystates/status "+t.Workers[TimeSlicedWorker], false, err)
	_, err = dyn.Resource(Bindings).Patch(ctx, t.Name, types.MergePatchType, ready, metav1.PatchOptions{}, "status")
	try("patch tenantbindings/status "+t.Name, false, err)
	_, err = dyn.Resource(PolicyReports).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": PolicyReports.GroupVersion().String(), "kind": "PolicyReport", "metadata": map[string]any{"name": "xila-guard"},
		"summary": map[string]any{"pass": 1},
	}}, dryRun)
	try("create policyreports in "+ns, false, err)
	err = Bind(ctx, kube, ns, pod.Name, t.Workers[CompliantWorker])
	try("create pods/binding in "+ns, false, err)
	_, err = kube.CoreV1().Nodes().Patch(ctx, t.Workers[TimeSlicedWorker], types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+PoolLabel+`":null}}}`), metav1.PatchOptions{})
	try("patch node "+t.Workers[TimeSlicedWorker], false, err)
	_, err = kube.CoreV1().Pods("default").Create(ctx, c.Pod("rbac-probe"), metav1.CreateOptions{})
	try("create pods in default", false, err)
	if err := DeletePod(ctx, c.Kube, ns, pod.Name); err != nil {
		return out, fmt.Errorf("deleting the probe pod: %w", err)
	}
	return out, nil
}
