//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// mainHook is the webhook that judges every namespace and node; the tests of
// this file share it.
var mainHook *webhook

func mainWebhook(t *testing.T) *webhook {
	t.Helper()
	if mainHook == nil {
		w := startWebhook(t)
		register(t, "main", w, nil, true)
		waitEnforced(t, tenantNS)
		mainHook = w
		t.Cleanup(func() { mainHook = nil })
	}
	return mainHook
}

// expect checks a request's error: nil when want is "", else an admission
// refusal that names want.
func expect(t *testing.T, what string, err error, want guard.Reason) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: refused: %v", what, err)
	case want != "":
		if err := fixture.RefusedWith(err, want); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// TestIntegration runs the admission rules against real requests.
func TestIntegration(t *testing.T) {
	mainWebhook(t)
	t.Run("Pods", testPods)
	t.Run("G-POD-SECURITY EphemeralContainers", testEphemeralContainers)
	t.Run("G-BINDING Bindings", testBindings)
	t.Run("G-POOL-LABEL NodePoolLock", testNodePoolLock)
}

func testPods(t *testing.T) {
	yes := true
	const dsController = "system:serviceaccount:kube-system:daemon-set-controller"
	cases := []struct {
		name string
		pod  *corev1.Pod
		want guard.Reason
	}{
		{"protected compliant", pod(tenantNS).Obj(), ""},
		{"G-SCHEDULER-NAME protected external scheduler", pod(tenantNS).Scheduler("volcano").Label("volcano.sh/job-name", "j").Obj(), ""},
		{"G-SCHEDULER-NAME protected default scheduler", pod(tenantNS).Scheduler("").Obj(), guard.ReasonSchedulerNotAllowed},
		{"G-NODE-NAME protected nodeName", pod(tenantNS).NodeName(poolNode).Obj(), guard.ReasonNodeNameSet},
		{"G-POD-SECURITY protected privileged init container", pod(tenantNS).InitContainer(corev1.Container{Name: "init", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: &yes}}).Obj(), guard.ReasonPrivilegedContainer},
		{"G-POD-SECURITY protected hostNetwork", pod(tenantNS).HostNetwork().Obj(), guard.ReasonHostNetwork},
		{"G-POD-SECURITY protected hostPID", pod(tenantNS).HostPID().Obj(), guard.ReasonHostPID},
		{"G-POD-SECURITY protected hostIPC", pod(tenantNS).HostIPC().Obj(), guard.ReasonHostIPC},
		{"G-POD-SECURITY protected hostPath", pod(tenantNS).HostPath("/", "/host").Obj(), guard.ReasonHostPathVolume},
		{"listed namespace of a tenant without policy", pod(noPolicyNS).Obj(), guard.ReasonNoPolicy},
		{"G-NAMESPACE-TENANT namespace labelled for a tenant but listed by no binding", pod(forgedNS).Obj(), guard.ReasonTenantUnresolved},
		{"G-POD-SECURITY protected pod with SYS_ADMIN", pod(tenantNS).AddCapabilities("SYS_ADMIN").Obj(), guard.ReasonPodSecurityBaseline},
		{"G-POOL-TOLERATIONS protected pod tolerating another tenant's pool", pod(tenantNS).
			Toleration(corev1.Toleration{Key: guard.LabelTenantPool, Value: "beta", Effect: corev1.TaintEffectNoSchedule}).Obj(), guard.ReasonForeignPool},
		{"G-SCHEDULER-NAME protected pod of volcano without its workload label", pod(tenantNS).Scheduler("volcano").Obj(),
			guard.ReasonSchedulerProfileMismatch},
		{"plain pod", pod(plainNS).Scheduler("").Obj(), ""},
		{"G-POOL-TOLERATIONS plain wildcard toleration", pod(plainNS).Toleration(corev1.Toleration{Operator: corev1.TolerationOpExists}).Obj(),
			guard.ReasonPoolToleration},
		{"G-POOL-TOLERATIONS plain pool nodeSelector", pod(plainNS).NodeSelector(guard.LabelTenantPool, "acme").Obj(), guard.ReasonPoolSelector},
		{"G-NODE-NAME plain nodeName on a pool node", pod(plainNS).NodeName(poolNode).Obj(), guard.ReasonPoolNodeName},
		{"G-NODE-NAME plain nodeName on a plain node", pod(plainNS).NodeName(plainNode).Obj(), ""},
	}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), fixture.MakeNamespace("infra").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kube.CoreV1().Pods(tc.pod.Namespace).Create(t.Context(), tc.pod, metav1.CreateOptions{})
			expect(t, tc.name, err, tc.want)
		})
	}
	// Pods created from another seat than the administrator's.
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want guard.Reason
		user string
	}{
		{"G-NODE-NAME trusted account's DaemonSet pod on a pool node", pod("infra").ControlledBy("apps/v1", "DaemonSet", "agent", "ds-uid").
			ServiceAccount("agent").NodeName(poolNode).Obj(), "", dsController},
		{"G-NODE-NAME trusted account's pod no DaemonSet owns on a pool node", pod("infra").ServiceAccount("agent").NodeName(poolNode).Obj(),
			guard.ReasonPoolNodeName, dsController},
		{"G-NODE-NAME trusted account's DaemonSet pod on a pool node, created by someone else", pod("infra").ControlledBy("apps/v1", "DaemonSet", "agent", "ds-uid").
			ServiceAccount("agent").NodeName(poolNode).Obj(), guard.ReasonPoolNodeName, "mallory"},
		{"G-MIRROR-POD a tenant's mirror pod on its own compliant pool node", pod(tenantNS).Annotation(corev1.MirrorPodAnnotationKey, "hash").
			NodeName(poolNode).Obj(), "", "system:node:" + poolNode},
		{"G-MIRROR-POD a general node's mirror pod in a tenant's namespace under confinement Pool", pod(tenantNS).Annotation(corev1.MirrorPodAnnotationKey, "hash").
			NodeName(plainNode).Obj(), guard.ReasonOutsidePool, "system:node:" + plainNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := as(t, tc.user).CoreV1().Pods(tc.pod.Namespace).Create(t.Context(), tc.pod, metav1.CreateOptions{})
			expect(t, tc.name, err, tc.want)
		})
	}
	t.Run("G-POOL-TOLERATIONS a pool toleration picked up while a tenant label came and went", testLabelFlip)
}

// testLabelFlip: whoever may create and label namespaces creates a gated
// pod of the default scheduler while the namespace belongs to no tenant,
// labels the namespace with a tenant no binding lists it for, and adds a
// toleration of that tenant's pool: refused, so that the pod cannot keep
// it once the label is gone.
func testLabelFlip(t *testing.T) {
	ctx := t.Context()
	const ns = "flip"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, fixture.MakeNamespace(ns).Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := pod(ns).Scheduler("").SchedulingGate("example.com/hold").Obj()
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the gated pod while the namespace belongs to no tenant: %v", err)
	}
	label := []byte(`{"metadata":{"labels":{"guard.xila.us/tenant":"acme"}}}`)
	if _, err := kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, label, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	tolerate := []byte(`{"spec":{"tolerations":[{"key":"` + guard.LabelTenantPool + `","operator":"Equal","value":"acme","effect":"NoSchedule"}]}}`)
	var err error
	// The webhook's namespace cache follows the label within moments.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.StrategicMergePatchType, tolerate, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	expect(t, "adding a pool toleration to a gated pod of an unresolved tenant", err, guard.ReasonForeignPool)
}

func testEphemeralContainers(t *testing.T) {
	ctx := t.Context()
	p, err := kube.CoreV1().Pods(tenantNS).Create(ctx, pod(tenantNS).Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add := func(name string, privileged bool) error {
		cur, err := kube.CoreV1().Pods(tenantNS).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ec := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: name, Image: "busybox", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
		}}
		if privileged {
			ec.SecurityContext = &corev1.SecurityContext{Privileged: &privilegedTrue}
		}
		cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, ec)
		_, err = kube.CoreV1().Pods(tenantNS).UpdateEphemeralContainers(ctx, p.Name, cur, metav1.UpdateOptions{})
		return err
	}
	expect(t, "privileged ephemeral container", add("debug", true), guard.ReasonPrivilegedContainer)
	expect(t, "plain ephemeral container", add("debug2", false), "")
	_, err = kube.CoreV1().Pods(tenantNS).Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
	expect(t, "label update", err, "")
}

var privilegedTrue = true

func bind(t *testing.T, user, ns, name, node string) error {
	t.Helper()
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	return as(t, user).CoreV1().Pods(ns).Bind(t.Context(), b, metav1.CreateOptions{})
}

func testBindings(t *testing.T) {
	ctx := t.Context()
	const scheduler = "system:serviceaccount:xila-guard-system:xila-guard-scheduler"
	mk := func(ns string) string {
		p, err := kube.CoreV1().Pods(ns).Create(ctx, pod(ns).Obj(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Name
	}
	plain := mk(plainNS)
	expect(t, "plain pod to a pool node by a tenant", bind(t, "system:serviceaccount:web:default", plainNS, plain, poolNode), guard.ReasonBindingNotAllowed)
	expect(t, "plain pod to a plain node by the default scheduler", bind(t, "system:kube-scheduler", plainNS, plain, plainNode), "")
	protected := mk(tenantNS)
	expect(t, "protected pod by the default scheduler", bind(t, "system:kube-scheduler", tenantNS, protected, plainNode), guard.ReasonBindingNotAllowed)
	expect(t, "protected pod by the controlled scheduler", bind(t, scheduler, tenantNS, protected, poolNode), "")

	// Volcano's binder is accepted, and each of its bindings is judged
	// for its node: the webhook's cache of evidence follows the API
	// server within moments, so a refusal is waited for.
	const volcano = "system:serviceaccount:volcano-system:volcano-scheduler"
	shared := poolNodeWith(t, "gpu-shared", "acme", v1alpha1.SharingTimeSlicing)
	beta := poolNodeWith(t, "gpu-beta", "beta", v1alpha1.SharingExclusive)
	forged := poolNodeWith(t, "gpu-forged", "acme", v1alpha1.SharingExclusive)
	setState(t, forged, "uid-of-another-node", v1alpha1.SharingExclusive)
	// Nodes whose one exclusive GPU of evidence does not account for what
	// they offer: a replica of a shared GPU (the device plugin's name for
	// time-sliced or MPS replicas), and GPUs by a KubeVirt passthrough name.
	replica := poolNodeWith(t, "gpu-replica", "acme", v1alpha1.SharingExclusive)
	offer(t, replica, "nvidia.com/gpu.shared", "1")
	passthrough := poolNodeWith(t, "gpu-passthrough", "acme", v1alpha1.SharingExclusive)
	offer(t, passthrough, "nvidia.com/GH100_H100_SXM5_80GB", "2")
	for _, tc := range []struct {
		name, node string
		want       guard.Reason
	}{
		{"to a time-sliced node of its pool", shared, guard.ReasonTimeSlicingForbidden},
		{"to another tenant's pool node", beta, guard.ReasonTenantMismatch},
		{"to a general node under confinement Pool", plainNode, guard.ReasonOutsidePool},
		{"to a node whose evidence names another node", forged, guard.ReasonEvidenceNodeMismatch},
		{"G-NODE-GPUS to a node offering a replica of a shared GPU its evidence calls exclusive", replica, guard.ReasonEvidenceIncomplete},
		{"G-NODE-GPUS to a node offering GPUs by a passthrough name its evidence does not count", passthrough, guard.ReasonEvidenceIncomplete},
	} {
		name := mk(tenantNS)
		t.Run(tc.name, func(t *testing.T) {
			var err error
			_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				err = bind(t, volcano, tenantNS, name, tc.node)
				return err == nil || fixture.RefusedWith(err, tc.want) == nil, nil
			})
			expect(t, "protected pod by Volcano's binder "+tc.name, err, tc.want)
		})
	}
	expect(t, "protected pod by Volcano's binder to a compliant node", bind(t, volcano, tenantNS, mk(tenantNS), poolNode), "")
	expect(t, "plain pod to a pool node by Volcano's binder", bind(t, volcano, plainNS, mk(plainNS), poolNode), guard.ReasonBindingNotAllowed)
}

// poolNodeWith creates a node of pool whose attested evidence shows one
// GPU shared as mode, and returns its name.
func poolNodeWith(t *testing.T, name, pool string, mode v1alpha1.GPUSharingMode) string {
	t.Helper()
	created, err := kube.CoreV1().Nodes().Create(t.Context(), fixture.MakeNode(name).Pool(pool).Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setState(t, name, created.UID, mode)
	return name
}

// offer makes a node offer count of an extended resource, as a device
// plugin's registration would.
func offer(t *testing.T, node, resource, count string) {
	t.Helper()
	patch := []byte(`{"status":{"capacity":{"` + resource + `":"` + count + `"},"allocatable":{"` + resource + `":"` + count + `"}}}`)
	if _, err := kube.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// testNodePoolLock binds a tenant pod to a fresh pool node, then tries to
// take the node out of the pool.
func testNodePoolLock(t *testing.T) {
	ctx := t.Context()
	const scheduler = "system:serviceaccount:xila-guard-system:xila-guard-scheduler"
	node := fixture.MakeNode("gpu-lock").Pool("acme").Obj()
	created, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setState(t, node.Name, created.UID, v1alpha1.SharingExclusive)
	p, err := kube.CoreV1().Pods(tenantNS).Create(ctx, pod(tenantNS).Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bind(t, scheduler, tenantNS, p.Name, node.Name); err != nil {
		t.Fatal(err)
	}
	unlabel := []byte(`{"metadata":{"labels":{"` + guard.LabelTenantPool + `":null}}}`)
	untaint := []byte(`{"spec":{"taints":[]}}`)
	// The webhook's pod cache sees the binding within moments.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, unlabel, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	if err != nil {
		t.Fatal("removing the pool label was never refused")
	}
	_, err = kube.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, unlabel, metav1.PatchOptions{})
	expect(t, "remove the pool label", err, guard.ReasonPoolMembershipLocked)
	if err != nil && !strings.Contains(err.Error(), tenantNS+"/"+p.Name) {
		t.Errorf("the refusal does not name the pod: %v", err)
	}
	// The status subresource keeps the spec but takes labels: it must be
	// locked as well.
	_, err = kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, unlabel, metav1.PatchOptions{}, "status")
	expect(t, "remove the pool label through nodes/status", err, guard.ReasonPoolMembershipLocked)
	_, err = kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, untaint, metav1.PatchOptions{})
	expect(t, "remove the pool taint", err, guard.ReasonPoolMembershipLocked)
	_, err = kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"zone":"a"}}}`), metav1.PatchOptions{})
	expect(t, "unrelated label", err, "")

	zero := int64(0)
	if err := kube.CoreV1().Pods(tenantNS).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, unlabel, metav1.PatchOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("the pool label cannot be removed after the tenant pod is gone")
	}
}

// TestIntegrationFailClosed runs a second webhook for namespace
// acme-faults, renews its serving certificate under load, then stops it:
// the tenant's pods are judged throughout, and refused while the webhook
// is down.
func TestIntegrationFailClosed(t *testing.T) {
	w := startWebhook(t)
	register(t, "faults", w, &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": faultsNS}}, true)
	waitEnforced(t, faultsNS)
	create := func(p *fixture.PodWrapper) error {
		_, err := kube.CoreV1().Pods(faultsNS).Create(t.Context(), p.Obj(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	expect(t, "privileged", create(pod(faultsNS).Privileged()), guard.ReasonPrivilegedContainer)

	// Renew the serving certificate: the webhook serves the new one with no
	// restart, and the API server still gets through.
	if got := servingSerial(t, w); got != 1 {
		t.Fatalf("serving serial %d, want 1", got)
	}
	if _, _, err := w.ca.WriteServing(w.dir, 2); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return servingSerial(t, w) == 2, nil
	})
	if err != nil {
		t.Fatal("the renewed certificate was never served")
	}
	expect(t, "privileged, after renewal", create(pod(faultsNS).Privileged()), guard.ReasonPrivilegedContainer)
	if err := create(pod(faultsNS)); err != nil {
		t.Errorf("a compliant pod after renewal was refused: %v", err)
	}

	w.stop()
	err = create(pod(faultsNS))
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("with the webhook down a protected create gave %v, want a webhook call failure", err)
	}
	// Other namespaces are not this webhook's; the main one is not running here.
	if _, err := kube.CoreV1().Pods(plainNS).Create(t.Context(), pod(plainNS).Obj(), metav1.CreateOptions{}); err != nil {
		t.Errorf("a pod outside the failed webhook's namespaces was refused: %v", err)
	}
	testPoolNodeWithWebhookDown(t)
}

// testPoolNodeWithWebhookDown updates a pool node while the webhook is
// down: updates that leave the pool label and the pool taint alone,
// through nodes and nodes/status, do not reach the webhook and go through
// (heartbeats, other labels, other taints, a cordon); taking the node out
// of its pool fails closed.
func testPoolNodeWithWebhookDown(t *testing.T) {
	ctx := t.Context()
	node := fixture.MakeNode("gpu-webhook-down").Pool("acme").Obj()
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	patch := func(body string, sub ...string) error {
		_, err := kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, sub...)
		return err
	}
	heartbeat := `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"2026-03-01T12:00:00Z","lastTransitionTime":"2026-03-01T12:00:00Z"}]}}`
	for what, err := range map[string]error{
		"a status heartbeat":           patch(heartbeat, "status"),
		"another label through status": patch(`{"metadata":{"labels":{"zone":"b"}}}`, "status"),
		"another label":                patch(`{"metadata":{"labels":{"zone":"c"}}}`),
		"another taint beside the pool taint": patch(`{"spec":{"taints":[{"key":"guard.xila.us/tenant-pool","value":"acme","effect":"NoSchedule"},` +
			`{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}}`),
		"a cordon": patch(`{"spec":{"unschedulable":true}}`),
	} {
		if err != nil {
			t.Errorf("%s on a pool node with the webhook down was refused: %v", what, err)
		}
	}
	for what, err := range map[string]error{
		"removing the pool label":                patch(`{"metadata":{"labels":{"guard.xila.us/tenant-pool":null}}}`),
		"removing the pool label through status": patch(`{"metadata":{"labels":{"guard.xila.us/tenant-pool":null}}}`, "status"),
		"changing the pool label":                patch(`{"metadata":{"labels":{"guard.xila.us/tenant-pool":"beta"}}}`),
		"removing the pool taint":                patch(`{"spec":{"taints":[]}}`),
		"changing the pool taint's value": patch(`{"spec":{"taints":[{"key":"guard.xila.us/tenant-pool","value":"beta","effect":"NoSchedule"},` +
			`{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}}`),
		"changing the pool taint's effect": patch(`{"spec":{"taints":[{"key":"guard.xila.us/tenant-pool","value":"acme","effect":"PreferNoSchedule"},` +
			`{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}}`),
	} {
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("%s with the webhook down: %v, want a webhook call failure", what, err)
		}
	}
}
