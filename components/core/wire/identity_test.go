package wire

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestTenantOf(t *testing.T) {
	if got := TenantOf(nil); got != nil {
		t.Errorf("TenantOf(nil) = %+v, want nil", got)
	}
	got := TenantOf(&resolve.Tenant{ID: "acme", Pool: "acme-gpus"})
	if diff := cmp.Diff(&Tenant{ID: "acme", Pool: "acme-gpus"}, got); diff != "" {
		t.Errorf("TenantOf (-want +got):\n%s", diff)
	}
}

func TestPolicyOf(t *testing.T) {
	if got := PolicyOf(nil); got != nil {
		t.Errorf("PolicyOf(nil) = %+v, want nil", got)
	}
	p := &v1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: "strict", ResourceVersion: "7"},
		Spec: v1alpha1.PlacementPolicySpec{Confinement: v1alpha1.ConfinementPool}}
	got := PolicyOf(p)
	if diff := cmp.Diff(&Policy{Name: "strict", Spec: p.Spec}, got); diff != "" {
		t.Errorf("PolicyOf (-want +got):\n%s", diff)
	}
}
