//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

const (
	// vmOwner is the tenant's user who runs and migrates the VM.
	vmOwner = "xg-vm-owner"
	// migrationJobUIDLabel is the label KubeVirt's controller puts on a
	// migration's target pod, its value the migration's UID.
	migrationJobUIDLabel = "kubevirt.io/migrationJobUID"
	// The workers: the VM runs on the first, whose lab TEE states the
	// allowed measurement; the second, the only other node of the pool,
	// states another one until the test gives it the allowed one.
	sourceWorker = 0
	targetWorker = 1
)

var gvrMigration = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstancemigrations"}

type migrationKey struct{}

// migrationEnv is what the feature's Setup made.
type migrationEnv struct {
	*tenantPool
	cluster *lab.Cluster
	// vmi is the tenant's VMI, mig its admitted migration.
	vmi, mig *unstructured.Unstructured
	// source and target are the launcher pods KubeVirt's controller made.
	source, target string
}

func migrationFrom(ctx context.Context, t *testing.T) *migrationEnv {
	t.Helper()
	m, ok := ctx.Value(migrationKey{}).(*migrationEnv)
	if !ok {
		t.Fatal("no migration set-up in the context: the feature's Setup failed")
	}
	return m
}

// migrationSteps migrate a VM of TestAttestation's tenant, on its release
// (confidential.vmMigrations on, KubeVirt's CRDs, no KubeVirt controller:
// the test acts as KubeVirt's controller): a migration is admitted only
// with its target constrained to the tenant's pool; the target pod
// KubeVirt's controller creates is refused for the default scheduler; for
// the controlled scheduler it waits while the only other node of the pool
// fails its attestation, and once that node is attested with the allowed
// measurement it runs there, bound against that node's own evidence, and
// the key broker releases the tenant's key to it. The last step changes
// the release: the target worker's attester states the allowed
// measurement from then on.
func migrationSteps(f *features.FeatureBuilder) *features.FeatureBuilder {
	return f.
		Assess("VM migration: the tenant's user creates its VMI, and the migrations webhook is called", setUpVMMigration).
		Assess("G-MIGRATION-TARGET a migration is admitted only with its target constrained to the tenant's pool", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			m := migrationFrom(ctx, t)
			ns := m.tenant
			owner := impersonated(t, cfg, vmOwner, nil).Resource(gvrMigration).Namespace(ns)
			migration := func(name string, sel map[string]any) *unstructured.Unstructured {
				spec := map[string]any{"vmiName": m.vmi.GetName()}
				if sel != nil {
					spec["addedNodeSelector"] = sel
				}
				return &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
					"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
				}}
			}
			for _, tc := range []struct {
				name string
				sel  map[string]any
			}{
				{"without a target constraint", nil},
				{"constrained to another pool", map[string]any{lab.PoolLabel: m.tenant + "-other"}},
			} {
				_, err := owner.Create(ctx, migration("refused", tc.sel), metav1.CreateOptions{})
				if err == nil || !strings.Contains(err.Error(), "MIGRATION_OUTSIDE_POOL") {
					t.Errorf("a migration %s: %v, want MIGRATION_OUTSIDE_POOL", tc.name, err)
				}
			}
			mig, err := owner.Create(ctx, migration("move-1", map[string]any{lab.PoolLabel: m.tenant}), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("a migration constrained to the tenant's pool: %v", err)
			}
			m.mig = mig
			return ctx
		}).
		Assess("the source launcher runs on the attested worker and gets the tenant's key", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			m, k := migrationFrom(ctx, t), keyReleaseFrom(ctx, t)
			cs := clientset(t, cfg)
			m.source = "virt-launcher-" + m.vmi.GetName() + "-src"
			p := launcherKBSPod(m, m.source, nil)
			p.Spec.Affinity = pinnedToNode(m.workers[sourceWorker])
			if _, err := kubevirtClient(t, cfg).CoreV1().Pods(m.tenant).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("KubeVirt's controller creates the source launcher: %v", err)
			}
			waitRunning(ctx, t, cs, m.tenant, m.source)
			wantReleased(t, "the source launcher", kbsExec(ctx, t, cfg, m.tenant, m.source, k.resource), k.sha256)
			return ctx
		}).
		Assess("G-MIGRATION-TARGET the target pod for the default scheduler is refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			m := migrationFrom(ctx, t)
			p := migrationTargetPod(m, "virt-launcher-"+m.vmi.GetName()+"-dflt")
			p.Spec.SchedulerName = corev1.DefaultSchedulerName
			_, err := kubevirtClient(t, cfg).CoreV1().Pods(m.tenant).Create(ctx, p, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "SCHEDULER_NOT_ALLOWED") {
				t.Errorf("the target pod for %s: %v, want SCHEDULER_NOT_ALLOWED", corev1.DefaultSchedulerName, err)
			}
			return ctx
		}).
		Assess("G-MIGRATION-TARGET the target pod waits for a freshly attested node of the pool, and gets the key on that node's own attestation", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			m, k := migrationFrom(ctx, t), keyReleaseFrom(ctx, t)
			cs := clientset(t, cfg)
			w := m.workers[targetWorker]
			m.target = "virt-launcher-" + m.vmi.GetName() + "-tgt"
			created, err := kubevirtClient(t, cfg).CoreV1().Pods(m.tenant).Create(ctx, migrationTargetPod(m, m.target), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("KubeVirt's controller creates the target pod: %v", err)
			}
			// The source's node is kept out by the anti-affinity to the
			// source launcher; the only other node of the pool states a
			// measurement the policy does not allow.
			waitRefusedWith(ctx, t, cs, created, "MEASUREMENT_NOT_ALLOWED")

			// The node is attested with the allowed measurement: the target
			// pod binds there, on that evidence.
			helmInstallAttestation(ctx, t, cfg, "lab")
			waitAttested(ctx, t, cfg, w, 2*time.Minute, func(s *attestedSpec) bool { return s.TEE.Attestation.Verdict == "Passed" })
			p := waitRunning(ctx, t, cs, m.tenant, m.target)
			if p.Spec.NodeName != w {
				t.Fatalf("the target pod runs on %s, want %s", p.Spec.NodeName, w)
			}
			wantBoundEvidence(t, p, waitAttested(ctx, t, cfg, w, time.Minute, func(*attestedSpec) bool { return true }))
			wantReleased(t, "the target pod", kbsExec(ctx, t, cfg, m.tenant, m.target, k.resource), k.sha256)
			waitKeyEvent(ctx, t, cs, p, keyReleasedEvent, "granted on node "+w)
			return ctx
		})
}

// setUpVMMigration installs KubeVirt's CRDs, lets the tenant's user
// write VMIs and migrations and KubeVirt's controller pods in the
// namespace of TestAttestation's tenant (its pool, policy and key), and
// creates the tenant's VMI.
func setUpVMMigration(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	cs := clientset(t, cfg)
	kubectl := filepath.Join(suite.BinDir, "kubectl")
	runTool(ctx, t, kubectl, "--kubeconfig", cfg.KubeconfigFile(), "apply", "--server-side", "-f",
		filepath.Join(suite.RepoRoot, "components/gpudevices/config/kubevirt-crds"))
	runTool(ctx, t, kubectl, "--kubeconfig", cfg.KubeconfigFile(), "wait", "--for=condition=Established", "--timeout=60s",
		"crd/virtualmachineinstances.kubevirt.io", "crd/virtualmachineinstancemigrations.kubevirt.io")
	m := &migrationEnv{tenantPool: attestedFrom(ctx, t), cluster: labCluster(t, cfg)}
	ctx = context.WithValue(ctx, migrationKey{}, m)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "vm-migration-e2e", Namespace: m.tenant}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachineinstances", "virtualmachineinstancemigrations"},
			Verbs: []string{"get", "list", "watch", "create", "delete"}},
	}}
	ctrlRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "vm-migration-e2e-kubevirt", Namespace: m.tenant}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
	}}
	for _, r := range []*rbacv1.Role{role, ctrlRole} {
		if _, err := cs.RbacV1().Roles(m.tenant).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []*rbacv1.RoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: m.tenant},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: vmOwner}}},
		{ObjectMeta: metav1.ObjectMeta{Name: ctrlRole.Name, Namespace: m.tenant},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ctrlRole.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: kubevirtSA, Namespace: kubevirtNS}}},
	} {
		if _, err := cs.RbacV1().RoleBindings(m.tenant).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The VMI names the controlled scheduler, which KubeVirt copies into
	// its launcher pods.
	vmi := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": "vm-1", "namespace": m.tenant},
		"spec": map[string]any{"schedulerName": lab.ControlledScheduler,
			"domain": map[string]any{"devices": map[string]any{}}},
	}}
	owner := impersonated(t, cfg, vmOwner, nil).Resource(gvrVMI).Namespace(m.tenant)
	var err error
	if m.vmi, err = owner.Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the tenant creates its VMI: %v", err)
	}
	// The API server calls the migrations webhook once the release's
	// configuration is in place: a dry run shows when.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
		"metadata": map[string]any{"name": "probe", "namespace": m.tenant}, "spec": map[string]any{"vmiName": "vm-1"},
	}}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := impersonated(t, cfg, vmOwner, nil).Resource(gvrMigration).Namespace(m.tenant).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "xila-guard"), nil
	})
	if err != nil {
		t.Fatalf("the migrations webhook is not called for namespace %s: %v", m.tenant, err)
	}
	return ctx
}

// kubevirtClient acts as KubeVirt's controller.
func kubevirtClient(t *testing.T, cfg *envconf.Config) kubernetes.Interface {
	t.Helper()
	k, err := kubernetes.NewForConfig(impersonatedConfig(cfg, "system:serviceaccount:"+kubevirtNS+":"+kubevirtSA,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + kubevirtNS, "system:authenticated"}))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// launcherKBSPod is a launcher pod of the feature's VMI, as KubeVirt's
// controller makes it (owned by the VMI, labelled as its launcher, the
// VMI's scheduler name), whose one container holds a KBS client, so that
// the test can ask the key broker from inside it; labels are added.
func launcherKBSPod(m *migrationEnv, name string, labels map[string]string) *corev1.Pod {
	yes := true
	p := kbsPod(name, "--hold")
	p.Namespace = m.tenant
	p.Labels = map[string]string{"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": string(m.vmi.GetUID())}
	for k, v := range labels {
		p.Labels[k] = v
	}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance",
		Name: m.vmi.GetName(), UID: m.vmi.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}
	p.Spec.SchedulerName = lab.ControlledScheduler
	p.Spec.TerminationGracePeriodSeconds = ptrTo(int64(0))
	return p
}

// migrationTargetPod is the target pod KubeVirt's controller makes for
// the feature's migration: labelled with the migration's UID, the
// migration's addedNodeSelector as its node selector, and kept off the
// source launcher's node by anti-affinity to the VMI's launchers.
func migrationTargetPod(m *migrationEnv, name string) *corev1.Pod {
	p := launcherKBSPod(m, name, map[string]string{migrationJobUIDLabel: string(m.mig.GetUID())})
	sel, _, _ := unstructured.NestedStringMap(m.mig.Object, "spec", "addedNodeSelector")
	p.Spec.NodeSelector = sel
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubevirt.io/created-by": string(m.vmi.GetUID())}},
			TopologyKey:   corev1.LabelHostname,
		}}}}
	return p
}
