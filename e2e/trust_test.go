//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/e2e/lab"
)

// trustRole is the ClusterRole (and binding) of the principals the trust
// boundary attempts act as, besides the tenant user and the nodes: an
// operator who may patch nodes, a namespace creator, and the binders.
const trustRole = "xg-e2e-trust"

const (
	operatorUser  = "xg-node-operator"
	nsCreatorUser = "xg-namespace-creator"
	betaNode      = "xg-beta-node"
	// Namespaces the namespace creator makes: one of no tenant, and one
	// labelled as the lab's tenant that no TenantBinding lists.
	plainNS  = "xg-trust-plain"
	forgedNS = "xg-trust-forged"
	// flipNS is a namespace of no tenant whose creator labels it as the
	// lab's tenant for a while.
	flipNS = "xg-trust-flip"
)

// attempt is one way around a trust boundary, tried from one principal's
// seat. want is "" when it must be allowed, rbacDenied when the
// authorizer must refuse it, and otherwise the texts (one of which) the
// admission refusal must contain. after, when set, checks that nothing
// ran where it must not.
type attempt struct {
	name  string
	want  string
	do    func(ctx context.Context) error
	after func(ctx context.Context) error
}

const rbacDenied = "RBAC"

// trustEnv is what the attempts act on.
type trustEnv struct {
	l                   *lab.Lab
	admin, tenant       kubernetes.Interface
	operator, nsCreator kubernetes.Interface
	binder              kubernetes.Interface
	// binderAccount is the user name of Volcano's binder.
	binderAccount     string
	defaultScheduler  kubernetes.Interface
	compliant, sliced string
	controlPlane      string
}

// trustSteps try, on the platform (TestPlatform), with the run:ai and
// Volcano integrations, every way a principal other than an administrator could
// move a node into a pool, vouch for its evidence or place a pod across
// tenants: as a node (impersonated kubelet credentials), an operator with
// node rights, the tenant user, a namespace creator, an external binder
// and the default scheduler. Every attempt must be refused for its reason
// and leave nothing running where it must not; the controls must pass.
// Worker 1 is the tenant's compliant node, worker 2 its time-sliced one, a
// node object with no kubelet is another tenant's pool, and the control
// plane is a general node.
func trustSteps(f *features.FeatureBuilder) *features.FeatureBuilder {
	return f.
		Assess("trust boundaries: every attempt is refused for its reason, and nothing runs where it must not", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			e := newTrustEnv(ctx, t, labFrom(ctx, t))
			for _, a := range e.attempts() {
				t.Run(a.name, func(t *testing.T) {
					err := a.do(ctx)
					if problem := judge(a.want, err); problem != "" {
						t.Error(problem)
					}
					if a.after != nil {
						if err := a.after(ctx); err != nil {
							t.Error(err)
						}
					}
				})
			}
			return ctx
		})
}

// tearDownTrust removes what trustSteps made.
func tearDownTrust(ctx context.Context, t *testing.T, l *lab.Lab) {
	_ = l.Kube.CoreV1().Nodes().Delete(ctx, betaNode, metav1.DeleteOptions{})
	_ = l.Dyn.Resource(lab.States).Delete(ctx, betaNode, metav1.DeleteOptions{})
	for _, ns := range []string{plainNS, forgedNS, flipNS} {
		if err := l.DeleteNamespace(ctx, ns); err != nil {
			t.Error(err)
		}
	}
	if err := l.RevokeBinding(ctx, trustRole); err != nil {
		t.Errorf("revoking %s: %v", trustRole, err)
	}
}

// judge returns what is wrong with err for an attempt that wants want.
func judge(want string, err error) string {
	switch {
	case want == "" && err != nil:
		return fmt.Sprintf("refused, want allowed: %v", err)
	case want == "":
		return ""
	case err == nil:
		return "allowed, want refused with " + want
	case want == rbacDenied:
		if !apierrors.IsForbidden(err) || strings.Contains(err.Error(), "admission") || strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			return fmt.Sprintf("want the authorizer's refusal, got %v", err)
		}
		return ""
	}
	for _, w := range strings.Split(want, "|") {
		if strings.Contains(err.Error(), w) {
			return ""
		}
	}
	return fmt.Sprintf("refused with %v, want %s", err, want)
}

func newTrustEnv(ctx context.Context, t *testing.T, l *lab.Lab) *trustEnv {
	t.Helper()
	e := &trustEnv{l: l, admin: l.Kube, compliant: l.Tenant.Workers[lab.CompliantWorker], sliced: l.Tenant.Workers[lab.TimeSlicedWorker]}
	cps, err := l.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil || len(cps.Items) == 0 {
		t.Fatalf("finding the control plane: %v", err)
	}
	e.controlPlane = cps.Items[0].Name
	// The other tenant's pool: a node object no kubelet serves, with
	// evidence, so that a pod bound there would never run anyway.
	beta := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: betaNode, Labels: map[string]string{lab.PoolLabel: "beta"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: lab.PoolLabel, Value: "beta", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}}}}
	_ = l.Kube.CoreV1().Nodes().Delete(ctx, betaNode, metav1.DeleteOptions{})
	created, err := l.Kube.CoreV1().Nodes().Create(ctx, beta, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the other tenant's node: %v", err)
	}
	state := fixture.MakeNodeSecurityState(betaNode, created.UID, v1alpha1.SourceMock).Label(lab.PoolLabel, "beta").
		Incarnation("lab-1").GPU("gpu-0", v1alpha1.SharingExclusive).Obj()
	if err := l.Replace(ctx, state); err != nil {
		t.Fatalf("creating the other tenant's evidence: %v", err)
	}
	for _, ns := range []string{plainNS, forgedNS, flipNS} {
		if err := l.DeleteNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	grantTrustRole(ctx, t, l)
	as := func(user string, groups ...string) kubernetes.Interface {
		k, _, err := l.As(user, groups...)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	e.tenant = as(l.User)
	e.operator = as(operatorUser)
	e.nsCreator = as(nsCreatorUser)
	e.defaultScheduler = as("system:kube-scheduler")
	binder, err := l.Profile("volcano")
	if err != nil {
		t.Fatal(err)
	}
	e.binderAccount = binder["binderServiceAccounts"].([]any)[0].(string)
	if e.binder, err = l.AsServiceAccount(e.binderAccount); err != nil {
		t.Fatal(err)
	}
	return e
}

// grantTrustRole gives the operator node rights and the namespace creator
// the right to create namespaces and pods: what those roles have in real
// clusters, so that only Xila Guard can refuse them.
func grantTrustRole(ctx context.Context, t *testing.T, l *lab.Lab) {
	t.Helper()
	_ = l.RevokeBinding(ctx, trustRole)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: trustRole}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, Verbs: []string{"get", "patch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"create"}},
	}}
	if _, err := l.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: trustRole},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: trustRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: operatorUser},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: nsCreatorUser}}}
	if _, err := l.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// patchNode merge-patches a node (or its status) as a dry run: admission
// runs, nothing changes.
func patchNode(ctx context.Context, c kubernetes.Interface, node string, status bool, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	var sub []string
	if status {
		sub = []string{"status"}
	}
	_, err = c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, b, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, sub...)
	return err
}

func labels(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return map[string]any{"metadata": map[string]any{"labels": m}}
}

func withTaints(patch map[string]any, taints ...corev1.Taint) map[string]any {
	patch["spec"] = map[string]any{"taints": taints}
	return patch
}

// underImageAllowList gives the lab tenant's policy an image allow-list
// that the lab's images are not in, tries create until the webhook's
// caches have the change and it is refused (or 30 s pass), and takes the
// allow-list away again, waiting until create is admitted again.
func (e *trustEnv) underImageAllowList(ctx context.Context, create func(context.Context) error) error {
	policy := e.l.Dyn.Resource(lab.Policies)
	set := func(cc string) error {
		_, err := policy.Patch(ctx, e.l.Tenant.Name, types.MergePatchType, []byte(`{"spec":{"confidentialComputing":`+cc+`}}`), metav1.PatchOptions{})
		return err
	}
	if err := set(`{"allowedImageDigests":["sha256:` + strings.Repeat("0", 64) + `"]}`); err != nil {
		return fmt.Errorf("setting the allow-list: %w", err)
	}
	defer func() {
		// Wait until the webhook admits again, so that the attempts after
		// this one see the policy they expect.
		_ = set("null")
		deadline := time.Now().Add(30 * time.Second)
		for create(ctx) != nil && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
		}
	}()
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for err = create(ctx); err == nil && time.Now().Before(deadline); err = create(ctx) {
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

// dryCreate creates a pod as a dry run.
func dryCreate(ctx context.Context, c kubernetes.Interface, ns string, p *corev1.Pod) error {
	_, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// held creates, as the administrator, a pod that no running scheduler
// picks up (it names Volcano's scheduler, which TestPlatform runs only after these steps)
// and returns its name, for a binder to bind.
func (e *trustEnv) held(ctx context.Context, ns string, opts ...lab.PodOption) (string, error) {
	p := e.l.Pod(envconf.RandomName("held", 12), append([]lab.PodOption{lab.WithScheduler("volcano"), lab.WithLabels(workloadLabels["volcano"])}, opts...)...)
	created, err := e.admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return created.Name, nil
}

// bindHeld holds a pod in ns and binds it to node as c; after checks the
// pod stayed unbound.
func (e *trustEnv) bindHeld(c kubernetes.Interface, ns, node string, names *[]string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		name, err := e.held(ctx, ns)
		if err != nil {
			return fmt.Errorf("creating the held pod: %w", err)
		}
		*names = append(*names, ns+"/"+name)
		return lab.Bind(ctx, c, ns, name, node)
	}
}

// addressIn is an address of node's pod range (the tenth), as the admin
// reads it.
func (e *trustEnv) addressIn(ctx context.Context, node string) (string, error) {
	n, err := e.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if len(n.Spec.PodCIDRs) == 0 {
		return "", fmt.Errorf("node %s has no pod range", node)
	}
	p, err := netip.ParsePrefix(n.Spec.PodCIDRs[0])
	if err != nil {
		return "", err
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String(), nil
}

// setAddress writes, as c (a kubelet) and as a dry run, the status of the
// pod ns/name with the one address addr.
func setAddress(ctx context.Context, admin, c kubernetes.Interface, ns, name, addr string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.PodIP, p.Status.PodIPs = addr, []corev1.PodIP{{IP: addr}}
		_, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
}

// podAddress binds a held tenant pod to node, as Volcano's binder, and
// gives it, as the node's kubelet, an address of other's pod range: the
// address of a pod on another node, which the tenant's Services would
// then send traffic to.
func (e *trustEnv) podAddress(kubelet kubernetes.Interface, ns, node, other string, names *[]string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		name, err := e.held(ctx, ns)
		if err != nil {
			return fmt.Errorf("creating the held pod: %w", err)
		}
		*names = append(*names, ns+"/"+name)
		if err := lab.Bind(ctx, e.binder, ns, name, node); err != nil {
			return fmt.Errorf("binding the pod to %s: %w", node, err)
		}
		addr, err := e.addressIn(ctx, other)
		if err != nil {
			return err
		}
		return setAddress(ctx, e.admin, kubelet, ns, name, addr)
	}
}

// ownPodAddress checks that the kubelet may give the pod an address of its
// own node's range, and deletes the pod.
func (e *trustEnv) ownPodAddress(kubelet kubernetes.Interface, node string, names *[]string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ns, name, _ := strings.Cut((*names)[len(*names)-1], "/")
		defer func() { _ = lab.DeletePod(ctx, e.admin, ns, name) }()
		addr, err := e.addressIn(ctx, node)
		if err != nil {
			return err
		}
		if err := setAddress(ctx, e.admin, kubelet, ns, name, addr); err != nil {
			return fmt.Errorf("the kubelet gives its pod %s, of its own range: %w", addr, err)
		}
		return nil
	}
}

// replica is the resource GPU feature discovery and the device plugin
// publish for time-sliced or MPS replicas of an NVIDIA GPU.
const replica = "nvidia.com/gpu.shared"

// setReplicas sets (n > 0) or removes the replicas node advertises, as the
// administrator: what a device plugin, or anyone who may write a node's
// status, can make it offer.
func (e *trustEnv) setReplicas(ctx context.Context, node string, n int) error {
	var v any
	if n > 0 {
		v = strconv.Itoa(n)
	}
	b, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": map[string]any{replica: v}, "allocatable": map[string]any{replica: v}}})
	if err != nil {
		return err
	}
	_, err = e.admin.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, b, metav1.PatchOptions{}, "status")
	return err
}

// dryBind binds a held pod to node as the Volcano binder without
// persisting it: admission runs, nothing is bound.
func (e *trustEnv) dryBind(ctx context.Context, ns, pod, node string) error {
	return e.binder.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

// offeringReplica makes node offer one GPU replica, waits until the
// webhook's node cache has it (a dry-run binding is refused), and then
// binds a held pod there as Volcano's binder: the node's evidence says its
// one device is exclusive, so the replica is a GPU it does not describe.
func (e *trustEnv) offeringReplica(ns, node string, names *[]string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		name, err := e.held(ctx, ns)
		if err != nil {
			return fmt.Errorf("creating the held pod: %w", err)
		}
		*names = append(*names, ns+"/"+name)
		if err := e.setReplicas(ctx, node, 1); err != nil {
			return fmt.Errorf("advertising a replica on %s: %w", node, err)
		}
		_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return e.dryBind(ctx, ns, name, node) != nil, nil
		})
		return lab.Bind(ctx, e.binder, ns, name, node)
	}
}

// withoutReplica checks that the pod stayed unbound, removes the replica
// and waits until a binding to node is admitted again.
func (e *trustEnv) withoutReplica(node string, names *[]string) func(ctx context.Context) error {
	unbound := e.unbound(names)
	return func(ctx context.Context) error {
		ns, name, _ := strings.Cut((*names)[len(*names)-1], "/")
		if err := e.setReplicas(ctx, node, 0); err != nil {
			return fmt.Errorf("removing the replica of %s: %w", node, err)
		}
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			last = e.dryBind(ctx, ns, name, node)
			return last == nil, nil
		}); err != nil {
			return fmt.Errorf("a binding to %s is still refused once the replica is gone: %v", node, last)
		}
		return unbound(ctx)
	}
}

// unbound checks that the last pod of names is not bound, and deletes it.
func (e *trustEnv) unbound(names *[]string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if len(*names) == 0 {
			return nil
		}
		ns, name, _ := strings.Cut((*names)[len(*names)-1], "/")
		defer func() { _ = lab.DeletePod(ctx, e.admin, ns, name) }()
		p, err := e.admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			return fmt.Errorf("pod %s/%s was bound to %s", ns, name, p.Spec.NodeName)
		}
		return nil
	}
}

func (e *trustEnv) attempts() []attempt {
	ns, pool := e.l.Tenant.Name, e.l.Tenant.Name
	node := func(n string) kubernetes.Interface {
		k, _, err := e.l.As("system:node:"+n, "system:nodes")
		if err != nil {
			panic(err)
		}
		return k
	}
	w1 := node(e.compliant)
	cp := node(e.controlPlane)
	poolTaint := func(v string) corev1.Taint {
		return corev1.Taint{Key: lab.PoolLabel, Value: v, Effect: corev1.TaintEffectNoSchedule}
	}
	pod := func(name string, opts ...lab.PodOption) *corev1.Pod { return e.l.Pod(name, opts...) }
	spec := func(f func(*corev1.PodSpec)) lab.PodOption { return func(p *corev1.Pod) { f(&p.Spec) } }
	own := func(v string) corev1.Toleration {
		return corev1.Toleration{Key: lab.PoolLabel, Operator: corev1.TolerationOpEqual, Value: v, Effect: corev1.TaintEffectNoSchedule}
	}
	tolerate := func(tol corev1.Toleration) lab.PodOption {
		return spec(func(s *corev1.PodSpec) { s.Tolerations = append(s.Tolerations, tol) })
	}
	require := func(req corev1.NodeSelectorRequirement, fields bool) lab.PodOption {
		term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}
		if fields {
			term = corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req}}
		}
		return spec(func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}}}
		})
	}
	containerSC := func(sc *corev1.SecurityContext) lab.PodOption {
		return spec(func(s *corev1.PodSpec) { s.Containers[0].SecurityContext = sc })
	}
	var held []string
	mine := func(name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			return dryCreate(ctx, e.tenant, ns, pod(name))
		}
	}
	tenantPod := func(name string, opts ...lab.PodOption) func(ctx context.Context) error {
		return func(ctx context.Context) error { return dryCreate(ctx, e.tenant, ns, pod(name, opts...)) }
	}
	plainPod := func(name string, opts ...lab.PodOption) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			return dryCreate(ctx, e.nsCreator, plainNS, pod(name, append([]lab.PodOption{lab.WithScheduler("default-scheduler")}, opts...)...))
		}
	}
	guardWrite := func(resource, name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, dyn, err := e.l.As(e.l.User)
			if err != nil {
				return err
			}
			gvr := lab.Bindings
			switch resource {
			case "placementpolicies":
				gvr = lab.Policies
			case "nodesecuritystates":
				gvr = lab.States
			}
			_, err = dyn.Resource(gvr).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	return []attempt{
		// Pool membership, from a node's own seat (NodeRestriction also
		// refuses a kubelet's taint changes).
		{"G-POOL-LABEL node removes its pool label", "POOL_ADMIN_ONLY", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.compliant, false, labels(lab.PoolLabel, nil))
		}, nil},
		{"G-POOL-LABEL node moves itself to another tenant's pool", "POOL_ADMIN_ONLY", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.compliant, false, labels(lab.PoolLabel, "beta"))
		}, nil},
		{"G-POOL-LABEL node moves itself to another pool through nodes/status", "POOL_ADMIN_ONLY", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.compliant, true, labels(lab.PoolLabel, "beta"))
		}, nil},
		{"G-POOL-LABEL node drops its pool taint", "POOL_ADMIN_ONLY|taints", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.compliant, false, withTaints(map[string]any{}))
		}, nil},
		{"G-POOL-LABEL control plane labels itself into a pool", "POOL_ADMIN_ONLY", func(ctx context.Context) error {
			return patchNode(ctx, cp, e.controlPlane, false, labels(lab.PoolLabel, pool))
		}, nil},
		{"G-POOL-LABEL control plane labels itself into a pool through nodes/status", "POOL_ADMIN_ONLY", func(ctx context.Context) error {
			return patchNode(ctx, cp, e.controlPlane, true, labels(lab.PoolLabel, pool))
		}, nil},
		{"G-POOL-LABEL node labels another node", rbacDenied + "|forbidden", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.sliced, false, labels(lab.PoolLabel, "beta"))
		}, nil},
		// A node's mirror pod in the tenant's namespace: the tenant's
		// placement on that node, judged like any other.
		{"G-MIRROR-POD time-sliced worker's kubelet puts a mirror pod in the tenant's namespace", "TIME_SLICING_FORBIDDEN", e.mirrorPod(node(e.sliced), ns, e.sliced), nil},
		{"G-POD-ADDRESS compliant worker's kubelet gives its tenant pod an address of the time-sliced worker's pods", "POD_ADDRESS_OUTSIDE_NODE",
			e.podAddress(w1, ns, e.compliant, e.sliced, &held), e.ownPodAddress(w1, e.compliant, &held)},
		{"G-MIRROR-POD control plane's kubelet puts a mirror pod in the tenant's namespace", "OUTSIDE_POOL", e.mirrorPod(cp, ns, e.controlPlane), nil},
		// Evidence, from a node's seat.
		{"G-EVIDENCE-LABELS node claims exclusive GPUs", "EVIDENCE_LABEL_NOT_ALLOWED", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.compliant, false, labels("nvidia.com/gpu.sharing-strategy", "none"))
		}, nil},
		{"G-EVIDENCE-LABELS node claims a TEE", "EVIDENCE_LABEL_NOT_ALLOWED", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.compliant, false, labels("feature.node.kubernetes.io/cpu-security.tdx.enabled", "true"))
		}, nil},
		{"G-EVIDENCE-LABELS node writes mock evidence", "EVIDENCE_LABEL_NOT_ALLOWED", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.compliant, false, labels("guard.xila.us/mock-sharing-mode", "Exclusive"))
		}, nil},
		{"G-EVIDENCE-LABELS node writes evidence through nodes/status", "EVIDENCE_LABEL_NOT_ALLOWED", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.compliant, true, labels("nvidia.com/gpu.product", "H100"))
		}, nil},
		{"node writes its NodeSecurityState", rbacDenied, func(ctx context.Context) error {
			_, dyn, err := e.l.As("system:node:"+e.compliant, "system:nodes")
			if err != nil {
				return err
			}
			_, err = dyn.Resource(lab.States).Patch(ctx, e.compliant, types.MergePatchType, []byte(`{"spec":{"complete":true}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, nil},
		// Attested evidence comes from the attestation controller alone,
		// whoever else holds write access to NodeSecurityStates.
		{"G-ATTESTED-EVIDENCE administrator vouches for a node's evidence as attested", "ATTESTED_EVIDENCE_NOT_ALLOWED", func(ctx context.Context) error {
			_, err := e.l.Dyn.Resource(lab.States).Patch(ctx, e.compliant, types.MergePatchType, []byte(`{"spec":{"source":"attested"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, nil},
		{"G-POOL-LABEL node heartbeat of a pool node (control)", "", func(ctx context.Context) error {
			return patchNode(ctx, w1, e.compliant, true, labels("example.com/heartbeat", "1"))
		}, nil},
		// An operator with node rights.
		{"G-POOL-LABEL operator labels the control plane into a pool with its taint", "POOL_ADMIN_ONLY", func(ctx context.Context) error {
			return patchNode(ctx, e.operator, e.controlPlane, false, withTaints(labels(lab.PoolLabel, pool), poolTaint(pool)))
		}, nil},
		{"G-EVIDENCE-LABELS operator changes evidence", "EVIDENCE_LABEL_NOT_ALLOWED", func(ctx context.Context) error {
			return patchNode(ctx, e.operator, e.sliced, false, labels("nvidia.com/gpu.sharing-strategy", "none"))
		}, nil},
		{"G-POOL-LABEL operator cordons a pool node (control)", "", func(ctx context.Context) error {
			return patchNode(ctx, e.operator, e.compliant, false, map[string]any{"spec": map[string]any{"unschedulable": true}})
		}, nil},
		// The administrator: label and taint always go together.
		{"G-POOL-LABEL administrator adds a pool label without its taint", "POOL_TAINT_MISSING", func(ctx context.Context) error {
			return patchNode(ctx, e.admin, e.controlPlane, false, labels(lab.PoolLabel, pool))
		}, nil},
		{"G-POOL-LABEL administrator labels a node into a pool with its taint (control)", "", func(ctx context.Context) error {
			cur, err := e.admin.CoreV1().Nodes().Get(ctx, e.controlPlane, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return patchNode(ctx, e.admin, e.controlPlane, false, withTaints(labels(lab.PoolLabel, pool), append(cur.Spec.Taints, poolTaint(pool))...))
		}, nil},
		// The tenant user: the ways around the controlled scheduler.
		{"G-SCHEDULER-NAME tenant pod names the default scheduler", "SCHEDULER_NOT_ALLOWED", tenantPod("default-sched", lab.WithScheduler("default-scheduler")), nil},
		{"G-SCHEDULER-NAME tenant pod names an impostor scheduler", "SCHEDULER_NOT_ALLOWED", tenantPod("impostor", lab.WithScheduler("volcano-impostor")), nil},
		{"G-SCHEDULER-NAME tenant pod names Volcano without its workload label", "SCHEDULER_PROFILE_MISMATCH", tenantPod("volcano-unlabelled", lab.WithScheduler("volcano")), nil},
		{"G-SCHEDULER-NAME tenant pod names run:ai with Volcano's label", "SCHEDULER_PROFILE_MISMATCH", tenantPod("runai-wrong", lab.WithScheduler("runai-scheduler"), lab.WithLabels(workloadLabels["volcano"])), nil},
		{"G-NODE-NAME tenant pod sets nodeName", "NODE_NAME_SET", tenantPod("pinned", lab.WithNodeName(e.compliant)), nil},
		{"G-DEVICE-CLAIMS tenant claims a DeviceClass its policy does not list", "DEVICE_CLASS_NOT_ALLOWED", func(ctx context.Context) error {
			c := fixture.MakeResourceClaim("gpu", ns).Request("gpu", "gpu.example.com", 1).Obj()
			_, err := e.tenant.ResourceV1().ResourceClaims(ns).Create(ctx, c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, nil},
		{"G-POD-SECURITY tenant pod is privileged", "PRIVILEGED_CONTAINER", tenantPod("privileged", lab.Privileged()), nil},
		{"G-POD-IMAGES tenant pod runs an image by tag under a digest allow-list", "IMAGE_NOT_PINNED", func(ctx context.Context) error {
			return e.underImageAllowList(ctx, func(ctx context.Context) error { return dryCreate(ctx, e.tenant, ns, pod("by-tag")) })
		}, nil},
		{"G-POD-IMAGES tenant pod mounts an image volume by tag under a digest allow-list", "mounts image", func(ctx context.Context) error {
			return e.underImageAllowList(ctx, tenantPod("image-volume", spec(func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "weights", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/weights:latest"}}}}
			})))
		}, nil},
		{"G-SERVICE-ADDRESS tenant Service claims a worker's address and the kubelet's port", "SERVICE_ADDRESS_NOT_ALLOWED", func(ctx context.Context) error {
			addr, err := e.internalIP(ctx, e.sliced)
			if err != nil {
				return err
			}
			_, err = e.tenant.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "capture"},
				Spec: corev1.ServiceSpec{ExternalIPs: []string{addr}, Ports: []corev1.ServicePort{{Port: 10250}}, Selector: map[string]string{"app": "capture"}}},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, nil},
		{"G-POD-SECURITY tenant pod uses hostNetwork", "HOST_NETWORK", tenantPod("hostnet", spec(func(s *corev1.PodSpec) { s.HostNetwork = true })), nil},
		{"G-POD-SECURITY tenant pod uses hostPID", "HOST_PID", tenantPod("hostpid", spec(func(s *corev1.PodSpec) { s.HostPID = true })), nil},
		{"G-POD-SECURITY tenant pod uses hostIPC", "HOST_IPC", tenantPod("hostipc", spec(func(s *corev1.PodSpec) { s.HostIPC = true })), nil},
		{"G-POD-SECURITY tenant pod mounts a hostPath", "HOST_PATH_VOLUME", tenantPod("hostpath", spec(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		})), nil},
		{"G-POD-SECURITY tenant pod adds SYS_ADMIN", "POD_SECURITY_BASELINE", tenantPod("sysadmin", containerSC(&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}})), nil},
		{"G-POD-SECURITY tenant pod runs seccomp Unconfined", "POD_SECURITY_BASELINE", tenantPod("unconfined", spec(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		})), nil},
		{"G-POD-SECURITY tenant pod runs AppArmor unconfined", "POD_SECURITY_BASELINE", tenantPod("apparmor", spec(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		})), nil},
		{"G-POD-SECURITY tenant pod takes a host port", "POD_SECURITY_BASELINE", tenantPod("hostport", spec(func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
		})), nil},
		{"G-POOL-TOLERATIONS tenant pod tolerates another tenant's pool", "FOREIGN_POOL", tenantPod("tol-beta", tolerate(own("beta"))), nil},
		{"G-POOL-TOLERATIONS tenant pod tolerates every pool", "FOREIGN_POOL", tenantPod("tol-any", tolerate(corev1.Toleration{Key: lab.PoolLabel, Operator: corev1.TolerationOpExists})), nil},
		{"G-POOL-TOLERATIONS tenant pod tolerates everything", "FOREIGN_POOL", tenantPod("tol-all", tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})), nil},
		{"G-POOL-TOLERATIONS tenant pod selects another tenant's pool", "FOREIGN_POOL", tenantPod("sel-beta", spec(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{lab.PoolLabel: "beta"} })), nil},
		{"G-POOL-TOLERATIONS tenant pod requires any pool but its own", "FOREIGN_POOL", tenantPod("aff-notin", require(corev1.NodeSelectorRequirement{Key: lab.PoolLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{pool}}, false)), nil},
		{"G-POOL-TOLERATIONS tenant pod tolerating exactly its own pool (control)", "", tenantPod("tol-own", tolerate(own(pool))), nil},
		{"G-SCHEDULER-NAME tenant pod of Volcano with its workload label (control)", "", tenantPod("volcano-ok", lab.WithScheduler("volcano"), lab.WithLabels(workloadLabels["volcano"])), nil},
		{"tenant compliant pod (control)", "", mine("compliant"), nil},
		// The tenant user, through the API.
		{"G-BINDING tenant binds its own pod", rbacDenied, func(ctx context.Context) error { return lab.Bind(ctx, e.tenant, ns, "any", e.compliant) }, nil},
		{"tenant patches a node", rbacDenied, func(ctx context.Context) error {
			return patchNode(ctx, e.tenant, e.compliant, false, labels(lab.PoolLabel, "beta"))
		}, nil},
		{"tenant labels its namespace", rbacDenied, func(ctx context.Context) error {
			_, err := e.tenant.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, nil},
		{"G-TENANT-RBAC tenant edits its TenantBinding", rbacDenied, guardWrite("tenantbindings", ns), nil},
		{"G-TENANT-RBAC tenant edits its PlacementPolicy", rbacDenied, guardWrite("placementpolicies", ns), nil},
		{"G-TENANT-RBAC tenant edits a NodeSecurityState", rbacDenied, guardWrite("nodesecuritystates", e.compliant), nil},
		{"G-KEY-POLICY tenant writes a KeyReleasePolicy for its namespace", rbacDenied, func(ctx context.Context) error {
			_, dyn, err := e.l.As(e.l.User)
			if err != nil {
				return err
			}
			stolen := fixture.MakeKeyReleasePolicy(pool).Key("default/key/stolen", "another-tenants-key", "key").Obj()
			stolen.Name = "xg-stolen"
			krp, err := fixture.ToUnstructured(stolen)
			if err != nil {
				return err
			}
			_, err = dyn.Resource(guardKeyPolicies).Create(ctx, krp, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, nil},
		// The record of the evidence a pod was bound against, which the key
		// broker releases keys by: only the controlled scheduler writes it.
		{"G-BOUND-EVIDENCE tenant pod claims the evidence it was bound against", "BOUND_EVIDENCE_RESERVED", tenantPod("claims-bound", func(p *corev1.Pod) {
			p.Annotations = map[string]string{guard.AnnotationBoundEvidence: "00000000-0000-0000-0000-000000000000/1"}
		}), nil},
		{"G-BOUND-EVIDENCE Volcano binds a tenant pod with a bound-evidence annotation", "BOUND_EVIDENCE_RESERVED", func(ctx context.Context) error {
			name, err := e.held(ctx, ns)
			if err != nil {
				return fmt.Errorf("creating the held pod: %w", err)
			}
			held = append(held, ns+"/"+name)
			return e.binder.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{guard.AnnotationBoundEvidence: "00000000-0000-0000-0000-000000000000/1"}},
				Target:     corev1.ObjectReference{Kind: "Node", Name: e.compliant},
			}, metav1.CreateOptions{})
		}, e.unbound(&held)},
		// A namespace creator.
		{"G-NAMESPACE-TENANT namespace creator makes a namespace", "", func(ctx context.Context) error {
			for _, n := range []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: plainNS}},
				{ObjectMeta: metav1.ObjectMeta{Name: forgedNS, Labels: map[string]string{lab.TenantLabel: pool}}}} {
				if _, err := e.nsCreator.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		}, nil},
		{"G-NAMESPACE-TENANT namespace labelled as the tenant but listed by no binding", "TENANT_UNRESOLVED", func(ctx context.Context) error {
			return dryCreate(ctx, e.nsCreator, forgedNS, pod("forged", tolerate(own(pool))))
		}, nil},
		{"G-POOL-TOLERATIONS pod of no tenant tolerates the pool", "POOL_TOLERATION", plainPod("plain-tol", tolerate(own(pool))), nil},
		{"G-POOL-TOLERATIONS pod of no tenant tolerates everything", "POOL_TOLERATION", plainPod("plain-wild", tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})), nil},
		{"G-POOL-TOLERATIONS pod of no tenant selects the pool", "POOL_SELECTOR", plainPod("plain-sel", spec(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{lab.PoolLabel: pool} })), nil},
		{"G-POOL-TOLERATIONS pod of no tenant requires the pool", "POOL_SELECTOR", plainPod("plain-aff", require(corev1.NodeSelectorRequirement{Key: lab.PoolLabel, Operator: corev1.NodeSelectorOpExists}, false)), nil},
		{"G-NODE-NAME pod of no tenant names a pool node", "POOL_NODE_NAME", plainPod("plain-pinned", lab.WithNodeName(e.compliant)), nil},
		{"G-NODE-NAME pod of no tenant requires a pool node by name", "POOL_NODE_NAME", plainPod("plain-field", require(corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{e.sliced}}, true)), nil},
		{"G-POOL-TOLERATIONS pod of no tenant (control)", "", plainPod("plain-ok"), nil},
		{"G-TRUSTED-NAMES namespace creator makes the namespace of an integration's binder", "RESERVED_NAMESPACE", func(ctx context.Context) error {
			binder := strings.Split(e.binderAccount, ":")
			_, err := e.nsCreator.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: binder[2]}},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, nil},
		{"G-TRUSTED-NAMES namespace creator makes an account in the platform's namespace", "RESERVED_NAMESPACE", func(ctx context.Context) error {
			_, err := e.nsCreator.CoreV1().ServiceAccounts(lab.PlatformNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "xila-guard-scheduler-2"}},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, nil},
		{"G-POOL-TOLERATIONS a pool toleration picked up while a tenant label came and went", "FOREIGN_POOL", e.labelFlip(pool), e.noPodOnPool(flipNS)},
		// Binders.
		{"G-BINDING default scheduler binds a tenant pod", "BINDING_NOT_ALLOWED", e.bindHeld(e.defaultScheduler, ns, e.compliant, &held), e.unbound(&held)},
		{"G-BINDING administrator binds a tenant pod", "BINDING_NOT_ALLOWED", e.bindHeld(e.admin, ns, e.compliant, &held), e.unbound(&held)},
		{"G-BINDING Volcano binds a tenant pod to the time-sliced node", "TIME_SLICING_FORBIDDEN", e.bindHeld(e.binder, ns, e.sliced, &held), e.unbound(&held)},
		{"G-BINDING Volcano binds a tenant pod to another tenant's node", "TENANT_MISMATCH", e.bindHeld(e.binder, ns, betaNode, &held), e.unbound(&held)},
		{"G-BINDING Volcano binds a tenant pod to a general node", "OUTSIDE_POOL", e.bindHeld(e.binder, ns, e.controlPlane, &held), e.unbound(&held)},
		{"G-BINDING Volcano binds a tenant pod to a node that does not exist", "NODE_UNKNOWN", e.bindHeld(e.binder, ns, "xg-no-such-node", &held), e.unbound(&held)},
		{"G-BINDING Volcano binds a pod of no tenant to a pool node", "BINDING_NOT_ALLOWED", e.bindHeld(e.binder, plainNS, e.compliant, &held), e.unbound(&held)},
		{"G-NODE-GPUS Volcano binds a tenant pod to the compliant node while it offers a GPU replica its evidence does not describe", "EVIDENCE_INCOMPLETE",
			e.offeringReplica(ns, e.compliant, &held), e.withoutReplica(e.compliant, &held)},
		{"G-BINDING G-BOUND-EVIDENCE Volcano binds a tenant pod to the compliant node (control)", "", e.bindHeld(e.binder, ns, e.compliant, &held), func(ctx context.Context) error {
			ns, name, _ := strings.Cut(held[len(held)-1], "/")
			defer func() { _ = lab.DeletePod(ctx, e.admin, ns, name) }()
			p, err := lab.WaitRunning(ctx, e.admin, ns, name)
			if err != nil {
				return err
			}
			if p.Spec.NodeName != e.compliant {
				return fmt.Errorf("the pod runs on %s, want %s", p.Spec.NodeName, e.compliant)
			}
			// The evidence its binding was judged on is recorded, as the
			// controlled scheduler records it, for the key broker.
			state, err := e.l.Dyn.Resource(lab.States).Get(ctx, e.compliant, metav1.GetOptions{})
			if err != nil {
				return err
			}
			uid, _, _ := unstructured.NestedString(state.Object, "spec", "nodeUID")
			inc, _, _ := unstructured.NestedString(state.Object, "spec", "incarnation")
			if got, want := p.Annotations[guard.AnnotationBoundEvidence], guard.BoundEvidence(uid, inc); got != want {
				return fmt.Errorf("the pod Volcano's binder placed records evidence %q, want %q", got, want)
			}
			return nil
		}},
		// Faults: with the webhook down, what it guards fails closed and
		// nothing else does.
		{"webhook down: a tenant pod fails closed, an unrelated pod is admitted, the node policies hold", "", func(ctx context.Context) error {
			return e.webhookDown(ctx, ns, plainNS, w1)
		}, nil},
	}
}

// webhookDown scales the webhook to zero, checks what is refused and what
// is not, and scales it back.
func (e *trustEnv) webhookDown(ctx context.Context, tenantNS, plainNS string, node kubernetes.Interface) error {
	restore, err := e.l.WebhookDown(ctx, func(ctx context.Context) error {
		return dryCreate(ctx, e.admin, tenantNS, e.l.Pod("down-probe"))
	})
	defer func() {
		if restore != nil {
			_ = restore(ctx)
		}
	}()
	if err != nil {
		return fmt.Errorf("a tenant pod was not refused with the webhook down: %w", err)
	}
	for i := range 20 {
		if err := dryCreate(ctx, e.nsCreator, plainNS, e.l.Pod(fmt.Sprintf("down-plain-%d", i), lab.WithScheduler("default-scheduler"))); err != nil {
			return fmt.Errorf("an unrelated pod was refused with the webhook down: %w", err)
		}
	}
	if err := dryCreate(ctx, e.nsCreator, plainNS, e.l.Pod("down-tol", tolerate0(lab.PoolLabel))); err == nil || !strings.Contains(err.Error(), "POOL_TOLERATION") {
		return fmt.Errorf("a pool toleration outside the tenants with the webhook down: %v, want POOL_TOLERATION", err)
	}
	if err := patchNode(ctx, node, e.compliant, false, labels(lab.PoolLabel, "beta")); err == nil || !strings.Contains(err.Error(), "POOL_ADMIN_ONLY") {
		return fmt.Errorf("a node moving itself to another pool with the webhook down: %v, want POOL_ADMIN_ONLY", err)
	}
	return nil
}

func tolerate0(key string) lab.PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}

// mirrorPod creates, as a dry run from the node's seat, the mirror pod of
// a static pod of the node's in ns, as its kubelet would: annotated,
// bound to the node and owned by it (the NodeRestriction plugin's
// conditions), naming the controlled scheduler.
func (e *trustEnv) mirrorPod(c kubernetes.Interface, ns, node string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		yes := true
		p := e.l.Pod("static-"+node, lab.WithNodeName(node))
		p.Annotations = map[string]string{"kubernetes.io/config.mirror": "e2e"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID, Controller: &yes}}
		return dryCreate(ctx, c, ns, p)
	}
}

// internalIP is a node's InternalIP address.
func (e *trustEnv) internalIP(ctx context.Context, node string) (string, error) {
	n, err := e.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address, nil
		}
	}
	return "", fmt.Errorf("node %s has no InternalIP", node)
}

// labelFlip: the namespace creator makes a namespace of no tenant and a
// gated pod of the default scheduler in it, labels the namespace as the
// tenant's (no binding lists it), and has the pod tolerate the tenant's
// pool, to take the label away and release the pod to the default
// scheduler with the toleration kept. The toleration must be refused.
func (e *trustEnv) labelFlip(pool string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		c := e.nsCreator
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: flipNS}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the namespace: %w", err)
		}
		p := e.l.Pod("gated", lab.WithScheduler("default-scheduler"))
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
		var err error
		// The namespace's default service account comes a moment later.
		_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err = c.CoreV1().Pods(flipNS).Create(ctx, p, metav1.CreateOptions{})
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("creating the gated pod: %w", err)
		}
		label := func(v string) error {
			patch := `{"metadata":{"labels":{"` + lab.TenantLabel + `":null}}}`
			if v != "" {
				patch = `{"metadata":{"labels":{"` + lab.TenantLabel + `":"` + v + `"}}}`
			}
			_, err := c.CoreV1().Namespaces().Patch(ctx, flipNS, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}
		if err := label(pool); err != nil {
			return fmt.Errorf("labelling the namespace: %w", err)
		}
		tolerate := []byte(`{"spec":{"tolerations":[{"key":"` + lab.PoolLabel + `","operator":"Equal","value":"` + pool + `","effect":"NoSchedule"}]}}`)
		var refused error
		// The webhook's namespace cache follows the label within moments.
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			_, refused = c.CoreV1().Pods(flipNS).Patch(ctx, "gated", types.StrategicMergePatchType, tolerate, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return refused != nil, nil
		})
		if refused == nil {
			// The attack went through: finish it, so that after sees where
			// the pod went.
			_, _ = c.CoreV1().Pods(flipNS).Patch(ctx, "gated", types.StrategicMergePatchType, tolerate, metav1.PatchOptions{})
		}
		if err := label(""); err != nil {
			return fmt.Errorf("removing the label: %w", err)
		}
		ungate := []byte(`{"spec":{"schedulingGates":null}}`)
		if _, err := c.CoreV1().Pods(flipNS).Patch(ctx, "gated", types.StrategicMergePatchType, ungate, metav1.PatchOptions{}); err != nil && refused == nil {
			return fmt.Errorf("releasing the pod: %w", err)
		}
		return refused
	}
}

// noPodOnPool checks, once the default scheduler had time to place them,
// that no pod of ns runs on a pool node.
func (e *trustEnv) noPodOnPool(ns string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		time.Sleep(3 * time.Second)
		pods, err := e.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			n, err := e.admin.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pool, ok := n.Labels[lab.PoolLabel]; ok {
				return fmt.Errorf("pod %s/%s of no tenant runs on node %s of pool %s", ns, p.Name, n.Name, pool)
			}
		}
		return nil
	}
}
