package admission

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// kubevirtController is the user KubeVirt's controller creates migration
// target pods as.
const kubevirtController = "system:serviceaccount:kubevirt:kubevirt-controller"

// vmim returns a VirtualMachineInstanceMigration of VMI vm-1 in ns, as
// KubeVirt's API encodes it, with the given spec fields besides vmiName.
func vmim(ns string, spec map[string]any) map[string]any {
	s := map[string]any{"vmiName": "vm-1"}
	for k, v := range spec {
		s[k] = v
	}
	return map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
		"metadata": map[string]any{"name": "mig-1", "namespace": ns},
		"spec":     s,
	}
}

func selector(kv ...string) map[string]any {
	out := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return map[string]any{"addedNodeSelector": out}
}

func rawJSON(t *testing.T, obj any) runtime.RawExtension {
	t.Helper()
	if obj == nil {
		return runtime.RawExtension{}
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

// migrationRequest builds the AdmissionRequest the API server sends for a
// VirtualMachineInstanceMigration.
func migrationRequest(t *testing.T, op admissionv1.Operation, ns string, obj, old any) *admissionv1.AdmissionRequest {
	t.Helper()
	return &admissionv1.AdmissionRequest{
		UID:       "uid-1",
		Kind:      metav1.GroupVersionKind{Group: kubevirtGroup, Version: "v1", Kind: migrationKind},
		Resource:  metav1.GroupVersionResource{Group: kubevirtGroup, Version: "v1", Resource: migrationsResource},
		Operation: op,
		Namespace: ns,
		Name:      "mig-1",
		UserInfo:  authenticationv1.UserInfo{Username: "alice"},
		Object:    rawJSON(t, obj),
		OldObject: rawJSON(t, old),
	}
}

func TestMigrationRules(t *testing.T) {
	const poolNS, poolName = "acme-pooled", "acme-gpus"
	sendTo := map[string]any{"sendTo": map[string]any{"migrationID": "m1", "connectURL": "other-cluster.example:9185"}}
	withSendTo := selector(pool, "acme")
	withSendTo["sendTo"] = sendTo["sendTo"]
	relabelled := vmim(tenantNS, nil)
	relabelled["metadata"].(map[string]any)["labels"] = map[string]any{"a": "b"}
	cases := []struct {
		name string
		op   admissionv1.Operation
		ns   string
		obj  any
		old  any
		// resource and sub override the request's resource.
		resource, sub string
		want          []guard.Reason
		// says are fragments the refusal's message holds.
		says []string
	}{
		{name: "target constrained to the tenant's pool", ns: tenantNS, obj: vmim(tenantNS, selector(pool, "acme"))},
		{name: "pool constraint narrowed further", ns: tenantNS, obj: vmim(tenantNS, selector(pool, "acme", corev1.LabelHostname, "gpu-7", "zone", "a"))},
		{name: "tenant whose pool is not its ID", ns: poolNS, obj: vmim(poolNS, selector(pool, poolName))},
		{name: "no target constraint", ns: tenantNS, obj: vmim(tenantNS, nil),
			want: []guard.Reason{guard.ReasonMigrationOutsidePool}, says: []string{RuleMigration, "does not constrain its target", pool + ": acme"}},
		{name: "empty addedNodeSelector", ns: tenantNS, obj: vmim(tenantNS, selector()),
			want: []guard.Reason{guard.ReasonMigrationOutsidePool}},
		{name: "constraint without the pool label", ns: tenantNS, obj: vmim(tenantNS, selector(corev1.LabelHostname, "gpu-7")),
			want: []guard.Reason{guard.ReasonMigrationOutsidePool}},
		{name: "another tenant's pool", ns: tenantNS, obj: vmim(tenantNS, selector(pool, "beta")),
			want: []guard.Reason{guard.ReasonMigrationOutsidePool}, says: []string{pool + "=beta", "other than the tenant's own (acme)"}},
		{name: "the tenant's ID where its pool differs", ns: poolNS, obj: vmim(poolNS, selector(pool, "acme")),
			want: []guard.Reason{guard.ReasonMigrationOutsidePool}, says: []string{"(" + poolName + ")"}},
		{name: "empty pool value", ns: tenantNS, obj: vmim(tenantNS, selector(pool, "")),
			want: []guard.Reason{guard.ReasonMigrationOutsidePool}},
		{name: "sent to another cluster", ns: tenantNS, obj: vmim(tenantNS, withSendTo),
			want: []guard.Reason{guard.ReasonMigrationOutsidePool}, says: []string{"other-cluster.example:9185"}},
		{name: "sent to another cluster without a constraint", ns: tenantNS, obj: vmim(tenantNS, sendTo),
			want: []guard.Reason{guard.ReasonMigrationOutsidePool, guard.ReasonMigrationOutsidePool}},
		{name: "receiving into the pool", ns: tenantNS, obj: vmim(tenantNS, map[string]any{
			"receive": map[string]any{"migrationID": "m1"}, "addedNodeSelector": map[string]any{pool: "acme"}})},
		{name: "unresolved tenant", ns: "orphaned", obj: vmim("orphaned", selector(pool, "acme")),
			want: []guard.Reason{guard.ReasonTenantUnresolved}, says: []string{"empty guard.xila.us/tenant label"}},
		{name: "namespace of no tenant", ns: plainNS, obj: vmim(plainNS, nil)},
		{name: "update that leaves the spec", op: admissionv1.Update, ns: tenantNS, obj: relabelled, old: vmim(tenantNS, nil)},
		{name: "update that drops the constraint", op: admissionv1.Update, ns: tenantNS,
			obj: vmim(tenantNS, nil), old: vmim(tenantNS, selector(pool, "acme")), want: []guard.Reason{guard.ReasonMigrationOutsidePool}},
		{name: "update to another pool", op: admissionv1.Update, ns: tenantNS,
			obj: vmim(tenantNS, selector(pool, "beta")), old: vmim(tenantNS, selector(pool, "acme")), want: []guard.Reason{guard.ReasonMigrationOutsidePool}},
		{name: "update that adds the constraint", op: admissionv1.Update, ns: tenantNS,
			obj: vmim(tenantNS, selector(pool, "acme")), old: vmim(tenantNS, nil)},
		{name: "update without the old object", op: admissionv1.Update, ns: tenantNS, obj: vmim(tenantNS, selector(pool, "acme")),
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "delete is not judged", op: admissionv1.Delete, ns: tenantNS, old: vmim(tenantNS, nil),
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "another resource", resource: "virtualmachineinstances", ns: tenantNS, obj: vmim(tenantNS, selector(pool, "acme")),
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "status subresource", sub: "status", ns: tenantNS, obj: vmim(tenantNS, selector(pool, "acme")),
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "another kind", ns: tenantNS, obj: map[string]any{"kind": "VirtualMachineInstance", "spec": map[string]any{}},
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "spec that does not decode", ns: tenantNS, obj: map[string]any{"kind": migrationKind, "spec": map[string]any{"addedNodeSelector": []string{"x"}}},
			want: []guard.Reason{guard.ReasonUnexpectedRequest}},
		{name: "no object", ns: tenantNS, want: []guard.Reason{guard.ReasonUnexpectedRequest}},
	}
	c := newFakeCluster()
	c.identities[poolNS] = Identity{Protected: true, Labelled: true, Tenant: &wire.Tenant{ID: "acme", Pool: poolName}}
	ev := &fakeEvaluator{verdict: allowVerdict()}
	v := newValidator(t, c, ev)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			req := migrationRequest(t, op, tc.ns, tc.obj, tc.old)
			if tc.resource != "" {
				req.Resource.Resource = tc.resource
			}
			req.SubResource = tc.sub
			resp := post(t, v.MigrationsHandler(), req)
			got := codes(resp)
			var want []string
			for _, r := range tc.want {
				want = append(want, string(r))
			}
			if resp.Allowed != (len(tc.want) == 0) || !slices.Equal(got, want) {
				t.Fatalf("allowed=%v codes=%v, want %v; %v", resp.Allowed, got, want, resp.Result)
			}
			for _, s := range tc.says {
				if !strings.Contains(resp.Result.Message, s) {
					t.Errorf("message %q does not say %q", resp.Result.Message, s)
				}
			}
			if !resp.Allowed && resp.AuditAnnotations["rule"] == "" {
				t.Errorf("refusal without a rule annotation: %v", resp.AuditAnnotations)
			}
		})
	}
	if ev.calls != 0 {
		t.Errorf("the evaluator was asked %d times; a migration names no node and needs no verdict", ev.calls)
	}

	t.Run("lookup failure", func(t *testing.T) {
		c := newFakeCluster()
		c.err = errBoom
		resp := post(t, newValidator(t, c, &fakeEvaluator{}).MigrationsHandler(), migrationRequest(t, admissionv1.Create, tenantNS, vmim(tenantNS, selector(pool, "acme")), nil))
		if got := codes(resp); resp.Allowed || !slices.Equal(got, []string{string(guard.ReasonLookupFailed)}) {
			t.Fatalf("codes %v, want LOOKUP_FAILED", got)
		}
	})
	t.Run("caches not synced", func(t *testing.T) {
		c := newFakeCluster()
		c.synced = false
		resp := post(t, newValidator(t, c, &fakeEvaluator{}).MigrationsHandler(), migrationRequest(t, admissionv1.Create, tenantNS, vmim(tenantNS, selector(pool, "acme")), nil))
		if got := codes(resp); resp.Allowed || !slices.Equal(got, []string{string(guard.ReasonLookupFailed)}) {
			t.Fatalf("codes %v, want LOOKUP_FAILED", got)
		}
	})
	t.Run("pods endpoint refuses migrations", func(t *testing.T) {
		resp := post(t, v.PodsHandler(), migrationRequest(t, admissionv1.Create, tenantNS, vmim(tenantNS, selector(pool, "acme")), nil))
		if got := codes(resp); resp.Allowed || !slices.Equal(got, []string{string(guard.ReasonUnexpectedRequest)}) {
			t.Fatalf("codes %v, want UNEXPECTED_REQUEST", got)
		}
	})
}

// TestMigrationTargetPod: the target pod KubeVirt's controller creates
// for a migration (labelled with the migration's UID, in the VMI's
// namespace, with the VMI's scheduler name and the migration's
// addedNodeSelector) is a protected pod like any other: the pod rules
// need nothing new to keep it on the controlled scheduler and in the pool.
func TestMigrationTargetPod(t *testing.T) {
	target := func(sched string, sel map[string]string) *corev1.Pod {
		p := makePod(tenantNS).scheduler(sched).sa("").
			label(MigrationJobUIDLabel, "6f1c0e2a-3b4d-4c5e-8f9a-0b1c2d3e4f5a").
			label("kubevirt.io", "virt-launcher").label("kubevirt.io/created-by", "vmi-uid").obj()
		p.Name = "virt-launcher-vm-1-abcde"
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: "vm-1", UID: "vmi-uid", Controller: ptrTo(true)}}
		p.Spec.NodeSelector = sel
		return p
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want guard.Reason
	}{
		{"default scheduler", target(corev1.DefaultSchedulerName, map[string]string{pool: "acme"}), guard.ReasonSchedulerNotAllowed},
		{"no scheduler named", target("", map[string]string{pool: "acme"}), guard.ReasonSchedulerNotAllowed},
		{"controlled scheduler in the pool", target(guard.SchedulerName, map[string]string{pool: "acme", "kubevirt.io/schedulable": "true"}), ""},
		{"controlled scheduler with another pool", target(guard.SchedulerName, map[string]string{pool: "beta"}), guard.ReasonForeignPool},
		{"pinned to a node", func() *corev1.Pod {
			p := target(guard.SchedulerName, map[string]string{pool: "acme"})
			p.Spec.NodeName = poolNode
			return p
		}(), guard.ReasonNodeNameSet},
	}
	ev := &fakeEvaluator{verdict: allowVerdict()}
	v := newValidator(t, newFakeCluster(), ev)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, v.PodsHandler(), request(t, "pods", "", admissionv1.Create, tenantNS, kubevirtController, tc.pod, nil))
			got := codes(resp)
			if tc.want == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %v", resp.Result.Message)
				}
				return
			}
			if resp.Allowed || len(got) == 0 || got[0] != string(tc.want) {
				t.Fatalf("codes %v, want %s first", got, tc.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestMigrationMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	v, err := New(Config{PoolLabel: pool, Cluster: newFakeCluster(), Evaluator: &fakeEvaluator{verdict: allowVerdict(), real: localEvaluator(t)}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	post(t, v.MigrationsHandler(), migrationRequest(t, admissionv1.Create, tenantNS, vmim(tenantNS, nil), nil))
	post(t, v.MigrationsHandler(), migrationRequest(t, admissionv1.Create, tenantNS, vmim(tenantNS, selector(pool, "acme")), nil))
	const res = "virtualmachineinstancemigrations.kubevirt.io"
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{res, "CREATE", "denied", string(guard.ReasonMigrationOutsidePool)}, 1},
		{[]string{res, "CREATE", "allowed", "NONE"}, 1},
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("requests%v = %v, want %v", c.labels, got, c.want)
		}
	}
}
