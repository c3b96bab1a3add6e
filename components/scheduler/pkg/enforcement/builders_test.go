package enforcement

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The tenants and namespaces of the tests.
const (
	acme   = "acme"
	globex = "globex"
	acmeNS = "acme-ml"
	plain  = "default"
)

func namespace(name string, labels, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
}

func tenantNS(name, tenant string) *corev1.Namespace {
	return namespace(name, map[string]string{guard.LabelTenant: tenant}, nil)
}

// node is a node in no pool, with room for pods.
func node(name string) *corev1.Node {
	return st.MakeNode().Name(name).UID(name + "-uid").Capacity(map[corev1.ResourceName]string{"cpu": "8", "pods": "110"}).Obj()
}

// poolNode is a node of a pool, labelled and tainted as the product says.
func poolNode(name, pool string) *corev1.Node {
	n := node(name)
	n.Labels = map[string]string{guard.LabelTenantPool: pool, corev1.LabelHostname: name}
	n.Spec.Taints = []corev1.Taint{{Key: guard.TaintTenantPool, Value: pool, Effect: corev1.TaintEffectNoSchedule}}
	return n
}

func tenantBinding(tenant string, namespaces []string, policy string) *v1alpha1.TenantBinding {
	b := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: tenant, Generation: 1},
		Spec: v1alpha1.TenantBindingSpec{TenantID: tenant, Namespaces: namespaces}}
	if policy != "" {
		b.Spec.EffectivePolicyRef = &v1alpha1.PolicyReference{Name: policy}
	}
	return b
}

// placementPolicy accepts attested evidence and forbids time-slicing.
func placementPolicy(name string, confinement v1alpha1.Confinement) *v1alpha1.PlacementPolicy {
	return &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.PlacementPolicySpec{Confinement: confinement,
			Evidence:   v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}},
			GPUSharing: &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}}}}
}

// nodeState is complete, attested, fresh evidence of one exclusive GPU.
func nodeState(n *corev1.Node, incarnation string) *v1alpha1.NodeSecurityState {
	return &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Generation: 1},
		Spec: v1alpha1.NodeSecurityStateSpec{NodeUID: n.UID, Incarnation: incarnation, ObservedAt: metav1.Now(),
			Source: v1alpha1.SourceAttested, Complete: true,
			Devices: []v1alpha1.GPUDevice{{ID: "gpu-0", SharingMode: v1alpha1.SharingExclusive}}}}
}

func pod(ns, name string) *corev1.Pod {
	return st.MakePod().Namespace(ns).Name(name).UID(ns + "-" + name).SchedulerName(guard.SchedulerName).Obj()
}

// acmeWorld is two nodes of acme's pool, one of globex's and one in no
// pool, each pool node with compliant evidence, acme's namespace bound to
// policy strict (confinement Pool), and a plain namespace.
func acmeWorld() world {
	a1, a2, g1, free := poolNode("a1", acme), poolNode("a2", acme), poolNode("g1", globex), node("free")
	return world{
		namespaces: []*corev1.Namespace{tenantNS(acmeNS, acme), namespace(plain, nil, nil)},
		nodes:      []*corev1.Node{a1, a2, g1, free},
		bindings:   []*v1alpha1.TenantBinding{tenantBinding(acme, []string{acmeNS}, "strict")},
		policies:   []*v1alpha1.PlacementPolicy{placementPolicy("strict", v1alpha1.ConfinementPool)},
		states:     []*v1alpha1.NodeSecurityState{nodeState(a1, "boot-1"), nodeState(a2, "boot-1"), nodeState(g1, "boot-1")},
	}
}
