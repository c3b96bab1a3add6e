package enforcement

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/fixture"
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

// roomyNode is a node with room for pods, of UID <name>-uid.
func roomyNode(name string) *fixture.NodeWrapper {
	return fixture.MakeNode(name).UID(types.UID(name+"-uid")).Capacity(corev1.ResourceCPU, "8").Capacity(corev1.ResourcePods, "110")
}

// node is a node in no pool, with room for pods.
func node(name string) *corev1.Node { return roomyNode(name).Obj() }

// poolNode is a node of a pool, labelled and tainted as the product says.
func poolNode(name, pool string) *corev1.Node { return roomyNode(name).Pool(pool).Obj() }

// nodeState is complete, attested, fresh evidence of one exclusive GPU.
func nodeState(n *corev1.Node, incarnation string) *v1alpha1.NodeSecurityState {
	return fixture.MakeNodeSecurityState(n.Name, n.UID, v1alpha1.SourceAttested).Incarnation(incarnation).
		Device(v1alpha1.GPUDevice{ID: "gpu-0", SharingMode: v1alpha1.SharingExclusive}).Obj()
}

// pod is a pod for xila-guard-scheduler, of UID <ns>-<name>.
func pod(ns, name string) *corev1.Pod {
	return fixture.MakePod(name, ns).UID(types.UID(ns + "-" + name)).Scheduler(guard.SchedulerName).Obj()
}

// acmeWorld is two nodes of acme's pool, one of globex's and one in no
// pool, each pool node with compliant evidence, acme's namespace bound to
// policy strict (confinement Pool), and a plain namespace.
func acmeWorld() world {
	a1, a2, g1, free := poolNode("a1", acme), poolNode("a2", acme), poolNode("g1", globex), node("free")
	binding := fixture.MakeTenantBinding(acme, acmeNS).Policy("strict").Obj()
	strict := fixture.MakePlacementPolicy("strict", v1alpha1.SourceAttested).ForbidSharing(v1alpha1.SharingTimeSlicing).Obj()
	// As the API server would have them; the activator compares generations.
	binding.Generation, strict.Generation = 1, 1
	return world{
		namespaces: []*corev1.Namespace{fixture.MakeNamespace(acmeNS).Tenant(acme).Obj(), fixture.MakeNamespace(plain).Obj()},
		nodes:      []*corev1.Node{a1, a2, g1, free},
		bindings:   []*v1alpha1.TenantBinding{binding},
		policies:   []*v1alpha1.PlacementPolicy{strict},
		states:     []*v1alpha1.NodeSecurityState{nodeState(a1, "boot-1"), nodeState(a2, "boot-1"), nodeState(g1, "boot-1")},
	}
}
