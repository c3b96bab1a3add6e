package pooltaint

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

func TestDesiredTaints(t *testing.T) {
	pool := func(v string) corev1.Taint {
		return corev1.Taint{Key: guard.TaintTenantPool, Value: v, Effect: corev1.TaintEffectNoSchedule}
	}
	other := corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	evict := corev1.Taint{Key: guard.TaintTenantPool, Value: "x", Effect: corev1.TaintEffectNoExecute}
	cases := []struct {
		name        string
		labels      map[string]string
		taints      []corev1.Taint
		want        []corev1.Taint
		wantChanged bool
	}{
		{name: "no pool, no taints"},
		{name: "new pool node", labels: map[string]string{guard.LabelTenantPool: "acme"}, taints: []corev1.Taint{other},
			want: []corev1.Taint{other, pool("acme")}, wantChanged: true},
		{name: "already tainted", labels: map[string]string{guard.LabelTenantPool: "acme"}, taints: []corev1.Taint{pool("acme"), other},
			want: []corev1.Taint{pool("acme"), other}},
		{name: "pool changed", labels: map[string]string{guard.LabelTenantPool: "beta"}, taints: []corev1.Taint{pool("acme")},
			want: []corev1.Taint{pool("beta")}, wantChanged: true},
		{name: "duplicate pool taints", labels: map[string]string{guard.LabelTenantPool: "acme"}, taints: []corev1.Taint{pool("acme"), pool("acme")},
			want: []corev1.Taint{pool("acme")}, wantChanged: true},
		{name: "left the pool", taints: []corev1.Taint{other, pool("acme"), evict},
			want: []corev1.Taint{other, evict}, wantChanged: true},
		{name: "admin NoExecute kept", labels: map[string]string{guard.LabelTenantPool: "acme"}, taints: []corev1.Taint{evict},
			want: []corev1.Taint{evict, pool("acme")}, wantChanged: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: tc.labels}, Spec: corev1.NodeSpec{Taints: tc.taints}}
			got, changed := DesiredTaints(node)
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
		})
	}
}
