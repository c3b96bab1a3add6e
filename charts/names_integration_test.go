//go:build integration

package charts

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Principals of the names tests, as the API server authenticates them.
var (
	// nsCreator may create and label namespaces and write in them, as a
	// self-service namespace provisioner grants: never an administrator.
	nsCreator = principal{"nina", []string{"namespace-creators", "system:authenticated"}}
	// acmeDev is a developer of tenant acme.
	acmeDev      = principal{"alice", []string{"acme-developers", "system:authenticated"}}
	dsController = principal{"system:serviceaccount:kube-system:daemon-set-controller",
		[]string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	controllerManager = principal{"system:kube-controller-manager", []string{"controller-managers", "system:authenticated"}}
)

// namesValues are trustValues with a trusted DaemonSet account in a
// namespace that does not exist yet.
func namesValues(t *testing.T) map[string]any {
	vals := trustValues(t)
	vals["webhook"].(map[string]any)["trustedServiceAccounts"] = []any{"system:serviceaccount:monitoring:node-exporter"}
	return vals
}

// grantNamesWrites gives the test groups, cluster-wide, what a namespace
// provisioner, a tenant's developers and kube-controller-manager may do:
// only the policies refuse.
func grantNamesWrites(t *testing.T) {
	t.Helper()
	grantGroups(t, "names-test-writer", false, []rbacv1.PolicyRule{{APIGroups: []string{""},
		Resources: []string{"namespaces", "serviceaccounts", "serviceaccounts/token", "pods", "pods/status", "services"},
		Verbs:     []string{"get", "create", "update", "patch"}}},
		"namespace-creators", "acme-developers", "system:serviceaccounts", "system:nodes", "controller-managers")
}

// refusedWith checks a write's error: nil when want is "", else a refusal
// (Forbidden or Invalid) whose message holds want.
func refusedWith(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: refused: %v", what, err)
	case want != "" && err == nil:
		t.Errorf("%s: allowed, want refused with %s", what, want)
	case want != "" && (!apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: refused with %v, want %s", what, err, want)
	}
}

// awaitRefusal waits until the policy named what refuses do with want: the
// API server's policy informer adds policies and bindings one by one.
func awaitRefusal(t *testing.T, what, want string, do func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = do(ctx)
		return last != nil && strings.Contains(last.Error(), want), nil
	})
	if err != nil {
		t.Fatalf("the %s policy does not take effect: %v (last: %v)", what, err, last)
	}
}

// TestIntegrationNamesAreNotTrust applies the chart's admission policies to
// a real API server and tries, from the seat of a principal that may
// create and label namespaces, of a tenant's developer and of a node, to
// obtain trust by creating a name: the namespace and account of a trusted
// DaemonSet, a pool toleration kept across a tenant label that came and
// went, and an address another party owns behind a Service.
func TestIntegrationNamesAreNotTrust(t *testing.T) {
	grantNodeWrites(t)
	grantNamesWrites(t)
	applyTrustPolicies(t, namesValues(t), poolKey)
	t.Cleanup(func() { removeTrustPolicies(t) })
	// The API server's policy informer adds each policy on its own, after
	// the probes applyTrustPolicies waits for: each policy these tests
	// exercise is awaited by a dry-run write it refuses.
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	ensureNamespace(t, "web-await", nil)
	awaitRefusal(t, "reserved namespaces", "RESERVED_NAMESPACE", func(ctx context.Context) error {
		_, err := nsCreator.client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, dry)
		return err
	})
	awaitRefusal(t, "pool pods", "POOL_TOLERATION", func(ctx context.Context) error {
		p := daemonSetPod(false)
		p.Namespace = "web-await"
		_, err := nsCreator.client(t).CoreV1().Pods(p.Namespace).Create(ctx, p, dry)
		return err
	})
	awaitRefusal(t, "service addresses", "SERVICE_ADDRESS_NOT_ALLOWED", func(ctx context.Context) error {
		_, err := nsCreator.client(t).CoreV1().Services("web-await").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "capture"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 10250}}, ExternalIPs: []string{"172.18.0.3"}}}, dry)
		return err
	})
	t.Run("G-TRUSTED-NAMES reserved namespaces", testReservedNamespaces)
	t.Run("G-NAMESPACE-TENANT a tenant's namespaces", testTenantNamespaces)
	t.Run("G-POOL-TOLERATIONS trusted DaemonSet accounts", testDaemonSetTrust)
	t.Run("G-POOL-TOLERATIONS a tenant label that comes and goes", testLabelFlip)
	t.Run("G-SERVICE-ADDRESS service addresses", testServiceAddresses)
	t.Run("the parameters missing", testParametersMissing)
}

// testParametersMissing: the policies read who is trusted from the
// release's PolicyParameterSet; while it is missing they refuse every
// write they guard, the administrators' included, and admit again once it
// is back.
func testParametersMissing(t *testing.T) {
	ctx := t.Context()
	ensureNamespace(t, "web-params", nil)
	var params *unstructured.Unstructured
	for _, o := range objects(t, mustRender(t, loadChart(t), namesValues(t)).Manifest) {
		if o.Kind == "PolicyParameterSet" {
			params = &unstructured.Unstructured{Object: o.raw}
		}
	}
	if params == nil {
		t.Fatal("the chart renders no PolicyParameterSet")
	}
	ingress := func(ctx context.Context) error {
		_, err := admin.client(t).CoreV1().Services("web-params").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ingress"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}, ExternalIPs: []string{"172.18.0.9"}}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	refusedWith(t, "an administrator's Service with an external address", ingress(ctx), "")
	if err := env.Client.Delete(ctx, params.DeepCopy()); err != nil {
		t.Fatalf("deleting the parameters: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Create(context.Background(), params.DeepCopy()) })
	awaitRefusal(t, "service addresses, without its parameters,", "no params found", ingress)
	_, err := acmeDev.client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-2"}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	refusedWith(t, "a namespace created while the parameters are missing", err, "no params found")
	recreate(t, params.DeepCopy())
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return ingress(ctx) == nil, nil
	})
	if err != nil {
		t.Errorf("the administrator is still refused once the parameters are back: %v", ingress(ctx))
	}
}

func testReservedNamespaces(t *testing.T) {
	ctx := t.Context()
	const refused = "RESERVED_NAMESPACE"
	ensureNamespace(t, releaseNS, nil)
	newNS := func(name string) func(p principal) error {
		return func(p principal) error {
			_, err := p.client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		}
	}
	newSA := func(ns, name string) func(p principal) error {
		return func(p principal) error {
			_, err := p.client(t).CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		}
	}
	token := func(ns, name string) func(p principal) error {
		return func(p principal) error {
			_, err := p.client(t).CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}
	}
	for _, tc := range []struct {
		name string
		who  principal
		do   func(p principal) error
		want string
	}{
		{"a namespace creator creates the namespace of a trusted DaemonSet account", nsCreator, newNS("monitoring"), refused},
		{"a namespace creator creates an evidence labeller's namespace", nsCreator, newNS("node-feature-discovery"), refused},
		{"a namespace creator creates the GPU operator's namespace", nsCreator, newNS("gpu-operator"), refused},
		{"a node creates a reserved namespace", nodeUser, newNS("monitoring"), refused},
		{"a namespace creator creates a namespace of its own", nsCreator, newNS("team-free"), ""},
		{"an administrator creates the trusted account's namespace", admin, newNS("monitoring"), ""},
		{"a namespace creator creates the trusted account", nsCreator, newSA("monitoring", "node-exporter"), refused},
		{"a tenant creates an account in the release namespace", acmeDev, newSA(releaseNS, "xila-guard-scheduler"), refused},
		{"kube-controller-manager creates the namespace's default account", controllerManager, newSA("monitoring", "default"), ""},
		{"an administrator creates the trusted account", admin, newSA("monitoring", "node-exporter"), ""},
		{"a namespace creator requests a token of the trusted account", nsCreator, token("monitoring", "node-exporter"), refused},
		{"an administrator requests a token of the trusted account", admin, token("monitoring", "node-exporter"), ""},
		{"a namespace creator creates an account in its own namespace", nsCreator, newSA("team-free", "builder"), ""},
	} {
		refusedWith(t, tc.name, tc.do(tc.who), tc.want)
	}
}

// testTenantNamespaces: a namespace a TenantBinding lists before it exists
// would make its creator the tenant.
func testTenantNamespaces(t *testing.T) {
	ctx := t.Context()
	binding := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: "acme-next"},
		Spec: v1alpha1.TenantBindingSpec{TenantID: "acme-next", Namespaces: []string{"acme-next-ml"}}}
	_ = env.Client.Delete(ctx, binding)
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	create := func(p principal, dry bool) error {
		opts := metav1.CreateOptions{}
		if dry {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := p.client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-next-ml"}}, opts)
		return err
	}
	var err error
	// The API server's policy informer learns of the binding within moments.
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		err = create(nsCreator, true)
		return err != nil, nil
	})
	refusedWith(t, "a namespace creator creates a namespace a TenantBinding lists", err, "RESERVED_NAMESPACE")
	refusedWith(t, "a namespace creator creates a namespace no TenantBinding lists", func() error {
		_, err := nsCreator.client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-unlisted"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}(), "")
	refusedWith(t, "an administrator creates the tenant's namespace", create(admin, false), "")
}

// daemonSetPod is a pod of the trusted account node-exporter that
// tolerates every taint, as a node agent's DaemonSet pod does.
func daemonSetPod(owned bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-exporter-", Namespace: "monitoring"},
		Spec: corev1.PodSpec{ServiceAccountName: "node-exporter", Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}
	if owned {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "node-exporter", UID: "ds-uid", Controller: &yes}}
	}
	return p
}

func testDaemonSetTrust(t *testing.T) {
	ctx := t.Context()
	ensureNamespace(t, "monitoring", nil)
	for _, tc := range []struct {
		name  string
		who   principal
		owned bool
		want  string
	}{
		{"someone else creates a pod of the trusted account that tolerates the pools", nsCreator, true, "POOL_TOLERATION"},
		{"the DaemonSet controller creates a pod of the trusted account no DaemonSet owns", dsController, false, "POOL_TOLERATION"},
		{"the DaemonSet controller creates the DaemonSet's pod", dsController, true, ""},
		{"kube-controller-manager creates the DaemonSet's pod", controllerManager, true, ""},
	} {
		_, err := tc.who.client(t).CoreV1().Pods("monitoring").Create(ctx, daemonSetPod(tc.owned), metav1.CreateOptions{})
		refusedWith(t, tc.name, err, tc.want)
	}
}

// testLabelFlip: a pod created while its namespace carried a tenant label
// keeps a pool toleration after the label is gone; while it waits to be
// scheduled it may not be released to the default scheduler, whose
// bindings in namespaces of no tenant nobody else judges.
func testLabelFlip(t *testing.T) {
	ctx := t.Context()
	const ns = "flip"
	ensureNamespace(t, ns, map[string]string{"guard.xila.us/tenant": "acme"})
	toleration := []corev1.Toleration{{Key: poolKey, Operator: corev1.TolerationOpEqual, Value: "acme", Effect: corev1.TaintEffectNoSchedule}}
	gated, err := nsCreator.client(t).CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gated", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}, Tolerations: toleration,
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/hold"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the gated pod while the namespace is labelled: %v", err)
	}
	running, err := nsCreator.client(t).CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}, Tolerations: toleration}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createNode(t, "flip-node", nil, "")
	if err := env.Client.SubResource("binding").Create(ctx, running, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: running.Name, Namespace: ns},
		Target: corev1.ObjectReference{Kind: "Node", Name: "flip-node"}}); err != nil {
		t.Fatalf("binding the running pod: %v", err)
	}
	unlabel := []byte(`{"metadata":{"labels":{"guard.xila.us/tenant":null}}}`)
	if _, err := nsCreator.client(t).CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, unlabel, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the namespace's owner removes the tenant label: %v", err)
	}
	ungate := []byte(`{"spec":{"schedulingGates":null}}`)
	// The policy informer sees the namespace's labels within moments.
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = nsCreator.client(t).CoreV1().Pods(ns).Patch(ctx, gated.Name, types.StrategicMergePatchType, ungate,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	refusedWith(t, "releasing a gated pod that kept a pool toleration across the tenant label", err, "POOL_TOLERATION")
	relabel := []byte(`{"metadata":{"labels":{"example.com/team":"web"}}}`)
	_, err = nsCreator.client(t).CoreV1().Pods(ns).Patch(ctx, running.Name, types.MergePatchType, relabel, metav1.PatchOptions{})
	refusedWith(t, "labelling a bound pod that kept its toleration", err, "")
}

func testServiceAddresses(t *testing.T) {
	ctx := t.Context()
	const refused = "SERVICE_ADDRESS_NOT_ALLOWED"
	ensureNamespace(t, "acme-svc", map[string]string{"guard.xila.us/tenant": "acme"})
	ensureNamespace(t, "web-svc", nil)
	svc := func(name string, mod func(*corev1.ServiceSpec)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 10250}}, Selector: map[string]string{"app": name}}}
		mod(&s.Spec)
		return s
	}
	externalIP := func(s *corev1.ServiceSpec) { s.ExternalIPs = []string{"172.18.0.3"} }
	lbIP := func(s *corev1.ServiceSpec) { s.Type, s.LoadBalancerIP = corev1.ServiceTypeLoadBalancer, "172.18.0.200" }
	for _, tc := range []struct {
		name string
		who  principal
		ns   string
		svc  *corev1.Service
		want string
	}{
		{"a tenant's Service claims another node's address", acmeDev, "acme-svc", svc("capture", externalIP), refused},
		{"a Service of no tenant claims another node's address", nsCreator, "web-svc", svc("capture", externalIP), refused},
		{"a tenant's Service asks its load balancer for an address", acmeDev, "acme-svc", svc("lb", lbIP), refused},
		{"a Service of no tenant asks its load balancer for an address", nsCreator, "web-svc", svc("lb", lbIP), ""},
		{"an administrator's Service with an external address", admin, "web-svc", svc("ingress", externalIP), ""},
		{"a tenant's plain Service", acmeDev, "acme-svc", svc("plain", func(*corev1.ServiceSpec) {}), ""},
	} {
		_, err := tc.who.client(t).CoreV1().Services(tc.ns).Create(ctx, tc.svc, metav1.CreateOptions{})
		refusedWith(t, tc.name, err, tc.want)
	}
	_, err := nsCreator.client(t).CoreV1().Services("web-svc").Patch(ctx, "ingress", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"team":"web"}}}`), metav1.PatchOptions{})
	refusedWith(t, "labelling a Service that keeps the address an administrator gave it", err, "")
	_, err = nsCreator.client(t).CoreV1().Services("web-svc").Patch(ctx, "ingress", types.MergePatchType,
		[]byte(`{"spec":{"externalIPs":["172.18.0.3","172.18.0.4"]}}`), metav1.PatchOptions{})
	refusedWith(t, "adding an address to a Service", err, refused)
}
