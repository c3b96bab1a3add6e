package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestStateReady(t *testing.T) {
	now := time.Unix(10000, 0)
	fresh := v1alpha1.NodeSecurityStateSpec{NodeUID: "u1", Complete: true, ObservedAt: metav1.NewTime(now.Add(-time.Minute))}
	for name, c := range map[string]struct {
		spec    v1alpha1.NodeSecurityStateSpec
		nodeUID string
		want    string
	}{
		"fresh":      {fresh, "u1", ReasonEvidenceCurrent},
		"no node":    {fresh, "", ReasonNodeNotFound},
		"other node": {fresh, "u2", ReasonNodeMismatch},
		"incomplete": {func() v1alpha1.NodeSecurityStateSpec { s := fresh; s.Complete = false; return s }(), "u1", ReasonEvidenceIncomplete},
		"stale": {func() v1alpha1.NodeSecurityStateSpec {
			s := fresh
			s.ObservedAt = metav1.NewTime(now.Add(-11 * time.Minute))
			return s
		}(), "u1", ReasonEvidenceStale},
	} {
		got := stateReady(&c.spec, "gpu-1", types.UID(c.nodeUID), 10*time.Minute, now)
		if got.Reason != c.want || (got.Status == metav1.ConditionTrue) != (c.want == ReasonEvidenceCurrent) || got.Message == "" {
			t.Errorf("%s: %+v, want %s", name, got, c.want)
		}
	}
}

func TestBindingReadyAndStatus(t *testing.T) {
	policy := &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.PlacementPolicySpec{
		Evidence: v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceNFD}}}}
	invalid := &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"}}
	b := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: "acme", Generation: 3},
		Spec: v1alpha1.TenantBindingSpec{TenantID: "acme", Namespaces: []string{"a", "b"}}}
	acme := &resolve.Tenant{ID: "acme"}
	ok := []namespaceState{{name: "a", exists: true, id: resolve.Identity{Tenant: acme, Policy: policy}},
		{name: "b", exists: true, id: resolve.Identity{Tenant: acme, Policy: policy}}}
	if c := bindingReady(b, ok); c.Status != metav1.ConditionTrue || c.Reason != ReasonResolved {
		t.Errorf("resolved binding: %+v", c)
	}
	missing := []namespaceState{ok[0], {name: "b", exists: false, id: ok[1].id}}
	if c := bindingReady(b, missing); c.Reason != ReasonNamespacesMissing || !strings.Contains(c.Message, "b") {
		t.Errorf("missing namespace: %+v", c)
	}
	stolen := []namespaceState{ok[0], {name: "b", exists: true, id: resolve.Identity{Tenant: &resolve.Tenant{ID: "globex"}, Note: "labelled globex"}}}
	if c := bindingReady(b, stolen); c.Reason != ReasonTenantUnresolved || !strings.Contains(c.Message, "labelled globex") {
		t.Errorf("namespace of another tenant: %+v", c)
	}
	noPolicy := []namespaceState{ok[0], {name: "b", exists: true, id: resolve.Identity{Tenant: acme}}}
	if c := bindingReady(b, noPolicy); c.Reason != ReasonPolicyNotFound {
		t.Errorf("no policy: %+v", c)
	}

	broken := []namespaceState{ok[0], {name: "b", exists: true, id: resolve.Identity{Tenant: acme, Policy: invalid}}}
	if c := bindingReady(b, broken); c.Reason != ReasonPolicyInvalid || !strings.Contains(c.Message, "PlacementPolicy bad") {
		t.Errorf("invalid policy: %+v", c)
	}
	if c := policyReady(invalid, []string{"acme"}); c.Reason != ReasonInvalid {
		t.Errorf("invalid policy's own Ready: %+v", c)
	}
	if c := policyReady(policy, nil); c.Reason != ReasonUnreferenced {
		t.Errorf("unreferenced policy: %+v", c)
	}

	var nodes []corev1.Node
	for i := 0; i < v1alpha1.MaxPoolNodes+3; i++ {
		nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%03d", i)}})
	}
	nodes[0], nodes[5] = nodes[5], nodes[0]
	bindingStatus(b, noPolicy, nodes)
	st := b.Status
	if st.ObservedGeneration != 3 || st.Pool != "acme" || st.PolicyFound || st.Policy != "" ||
		st.PoolNodeCount != int32(len(nodes)) || len(st.PoolNodes) != v1alpha1.MaxPoolNodes || st.PoolNodes[0] != "n000" ||
		st.Namespaces[0].Policy != "p" || st.Namespaces[1].Policy != "" {
		t.Errorf("status %+v", st)
	}
	bindingStatus(b, ok, nil)
	if !b.Status.PolicyFound || b.Status.Policy != "p" || b.Status.PoolNodes != nil || b.Status.PoolNodeCount != 0 {
		t.Errorf("status %+v", b.Status)
	}
}
