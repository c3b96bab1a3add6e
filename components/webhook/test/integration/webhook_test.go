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

// expect checks a request's error: nil when want is "", else an error that
// names xila-guard and contains want.
func expect(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: refused: %v", what, err)
	case want != "" && err == nil:
		t.Errorf("%s: allowed, want refused with %s", what, want)
	case want != "" && (!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "xila-guard")):
		t.Errorf("%s: refused with %v, want %s", what, err, want)
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
	daemonSet := func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: &yes}}
	}
	mirror := func(node string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
			p.Spec.NodeName = node
		}
	}
	const dsController = "system:serviceaccount:kube-system:daemon-set-controller"
	cases := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"protected compliant", pod(tenantNS), ""},
		{"G-SCHEDULER-NAME protected external scheduler", pod(tenantNS, func(p *corev1.Pod) {
			p.Spec.SchedulerName = "volcano"
			p.Labels = map[string]string{"volcano.sh/job-name": "j"}
		}), ""},
		{"G-SCHEDULER-NAME protected default scheduler", pod(tenantNS, func(p *corev1.Pod) { p.Spec.SchedulerName = "" }), string(guard.ReasonSchedulerNotAllowed)},
		{"G-NODE-NAME protected nodeName", pod(tenantNS, func(p *corev1.Pod) { p.Spec.NodeName = poolNode }), string(guard.ReasonNodeNameSet)},
		{"G-POD-SECURITY protected privileged init container", pod(tenantNS, func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}}
		}), string(guard.ReasonPrivilegedContainer)},
		{"G-POD-SECURITY protected hostNetwork", pod(tenantNS, func(p *corev1.Pod) { p.Spec.HostNetwork = true }), string(guard.ReasonHostNetwork)},
		{"G-POD-SECURITY protected hostPID", pod(tenantNS, func(p *corev1.Pod) { p.Spec.HostPID = true }), string(guard.ReasonHostPID)},
		{"G-POD-SECURITY protected hostIPC", pod(tenantNS, func(p *corev1.Pod) { p.Spec.HostIPC = true }), string(guard.ReasonHostIPC)},
		{"G-POD-SECURITY protected hostPath", pod(tenantNS, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}), string(guard.ReasonHostPathVolume)},
		{"listed namespace of a tenant without policy", pod(noPolicyNS), string(guard.ReasonNoPolicy)},
		{"G-NAMESPACE-TENANT namespace labelled for a tenant but listed by no binding", pod(forgedNS), string(guard.ReasonTenantUnresolved)},
		{"G-POD-SECURITY protected pod with SYS_ADMIN", pod(tenantNS, func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		}), string(guard.ReasonPodSecurityBaseline)},
		{"G-POOL-TOLERATIONS protected pod tolerating another tenant's pool", pod(tenantNS, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: guard.LabelTenantPool, Value: "beta", Effect: corev1.TaintEffectNoSchedule}}
		}), string(guard.ReasonForeignPool)},
		{"G-SCHEDULER-NAME protected pod of volcano without its workload label", pod(tenantNS, func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano"; p.Labels = nil }),
			string(guard.ReasonSchedulerProfileMismatch)},
		{"plain pod", pod(plainNS, func(p *corev1.Pod) { p.Spec.SchedulerName = "" }), ""},
		{"G-POOL-TOLERATIONS plain wildcard toleration", pod(plainNS, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), string(guard.ReasonPoolToleration)},
		{"G-POOL-TOLERATIONS plain pool nodeSelector", pod(plainNS, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{guard.LabelTenantPool: "acme"} }), string(guard.ReasonPoolSelector)},
		{"G-NODE-NAME plain nodeName on a pool node", pod(plainNS, func(p *corev1.Pod) { p.Spec.NodeName = poolNode }), string(guard.ReasonPoolNodeName)},
		{"G-NODE-NAME plain nodeName on a plain node", pod(plainNS, func(p *corev1.Pod) { p.Spec.NodeName = plainNode }), ""},
	}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}, metav1.CreateOptions{}); err != nil {
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
		want string
		user string
	}{
		{"G-NODE-NAME trusted account's DaemonSet pod on a pool node", pod(plainNS, daemonSet, func(p *corev1.Pod) {
			p.Namespace, p.Spec.ServiceAccountName, p.Spec.NodeName = "infra", "agent", poolNode
		}), "", dsController},
		{"G-NODE-NAME trusted account's pod no DaemonSet owns on a pool node", pod(plainNS, func(p *corev1.Pod) {
			p.Namespace, p.Spec.ServiceAccountName, p.Spec.NodeName = "infra", "agent", poolNode
		}), string(guard.ReasonPoolNodeName), dsController},
		{"G-NODE-NAME trusted account's DaemonSet pod on a pool node, created by someone else", pod(plainNS, daemonSet, func(p *corev1.Pod) {
			p.Namespace, p.Spec.ServiceAccountName, p.Spec.NodeName = "infra", "agent", poolNode
		}), string(guard.ReasonPoolNodeName), "mallory"},
		{"G-MIRROR-POD a tenant's mirror pod on its own compliant pool node", pod(tenantNS, mirror(poolNode)), "", "system:node:" + poolNode},
		{"G-MIRROR-POD a general node's mirror pod in a tenant's namespace under confinement Pool", pod(tenantNS, mirror(plainNode)),
			string(guard.ReasonOutsidePool), "system:node:" + plainNode},
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
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := pod(ns, func(p *corev1.Pod) {
		p.Spec.SchedulerName = ""
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	})
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
	expect(t, "adding a pool toleration to a gated pod of an unresolved tenant", err, string(guard.ReasonForeignPool))
}

func testEphemeralContainers(t *testing.T) {
	ctx := t.Context()
	p, err := kube.CoreV1().Pods(tenantNS).Create(ctx, pod(tenantNS), metav1.CreateOptions{})
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
	expect(t, "privileged ephemeral container", add("debug", true), string(guard.ReasonPrivilegedContainer))
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
		p, err := kube.CoreV1().Pods(ns).Create(ctx, pod(ns), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Name
	}
	plain := mk(plainNS)
	expect(t, "plain pod to a pool node by a tenant", bind(t, "system:serviceaccount:web:default", plainNS, plain, poolNode), string(guard.ReasonBindingNotAllowed))
	expect(t, "plain pod to a plain node by the default scheduler", bind(t, "system:kube-scheduler", plainNS, plain, plainNode), "")
	protected := mk(tenantNS)
	expect(t, "protected pod by the default scheduler", bind(t, "system:kube-scheduler", tenantNS, protected, plainNode), string(guard.ReasonBindingNotAllowed))
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
	for _, tc := range []struct{ name, node, want string }{
		{"to a time-sliced node of its pool", shared, string(guard.ReasonTimeSlicingForbidden)},
		{"to another tenant's pool node", beta, string(guard.ReasonTenantMismatch)},
		{"to a general node under confinement Pool", plainNode, string(guard.ReasonOutsidePool)},
		{"to a node whose evidence names another node", forged, string(guard.ReasonEvidenceNodeMismatch)},
		{"G-NODE-GPUS to a node offering a replica of a shared GPU its evidence calls exclusive", replica, string(guard.ReasonEvidenceIncomplete)},
		{"G-NODE-GPUS to a node offering GPUs by a passthrough name its evidence does not count", passthrough, string(guard.ReasonEvidenceIncomplete)},
	} {
		name := mk(tenantNS)
		t.Run(tc.name, func(t *testing.T) {
			var err error
			_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				err = bind(t, volcano, tenantNS, name, tc.node)
				return err == nil || strings.Contains(err.Error(), tc.want), nil
			})
			expect(t, "protected pod by Volcano's binder "+tc.name, err, tc.want)
		})
	}
	expect(t, "protected pod by Volcano's binder to a compliant node", bind(t, volcano, tenantNS, mk(tenantNS), poolNode), "")
	expect(t, "plain pod to a pool node by Volcano's binder", bind(t, volcano, plainNS, mk(plainNS), poolNode), string(guard.ReasonBindingNotAllowed))
}

// poolNodeWith creates a node of pool whose attested evidence shows one
// GPU shared as mode, and returns its name.
func poolNodeWith(t *testing.T, name, pool string, mode v1alpha1.GPUSharingMode) string {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{guard.LabelTenantPool: pool}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: guard.TaintTenantPool, Value: pool, Effect: corev1.TaintEffectNoSchedule}}}}
	created, err := kube.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
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
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-lock", Labels: map[string]string{guard.LabelTenantPool: "acme"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: guard.TaintTenantPool, Value: "acme", Effect: corev1.TaintEffectNoSchedule}}}}
	created, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setState(t, node.Name, created.UID, v1alpha1.SharingExclusive)
	p, err := kube.CoreV1().Pods(tenantNS).Create(ctx, pod(tenantNS), metav1.CreateOptions{})
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
	expect(t, "remove the pool label", err, string(guard.ReasonPoolMembershipLocked))
	if err != nil && !strings.Contains(err.Error(), tenantNS+"/"+p.Name) {
		t.Errorf("the refusal does not name the pod: %v", err)
	}
	// The status subresource keeps the spec but takes labels: it must be
	// locked as well.
	_, err = kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, unlabel, metav1.PatchOptions{}, "status")
	expect(t, "remove the pool label through nodes/status", err, string(guard.ReasonPoolMembershipLocked))
	_, err = kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, untaint, metav1.PatchOptions{})
	expect(t, "remove the pool taint", err, string(guard.ReasonPoolMembershipLocked))
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
	create := func(mods ...func(*corev1.Pod)) error {
		_, err := kube.CoreV1().Pods(faultsNS).Create(t.Context(), pod(faultsNS, mods...), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	expect(t, "privileged", create(privileged), string(guard.ReasonPrivilegedContainer))

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
	expect(t, "privileged, after renewal", create(privileged), string(guard.ReasonPrivilegedContainer))
	if err := create(); err != nil {
		t.Errorf("a compliant pod after renewal was refused: %v", err)
	}

	w.stop()
	err = create()
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("with the webhook down a protected create gave %v, want a webhook call failure", err)
	}
	// Other namespaces are not this webhook's; the main one is not running here.
	if _, err := kube.CoreV1().Pods(plainNS).Create(t.Context(), pod(plainNS), metav1.CreateOptions{}); err != nil {
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
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-webhook-down", Labels: map[string]string{guard.LabelTenantPool: "acme"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: guard.TaintTenantPool, Value: "acme", Effect: corev1.TaintEffectNoSchedule}}}}
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
