package postbind

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// TestResolveIdentityReadErrors checks that a failed read is an error that
// says what could not be read, never an identity.
func TestResolveIdentityReadErrors(t *testing.T) {
	s := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(s)
	boom := errors.New("boom")
	labelled := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{guard.LabelTenant: "acme"}}}
	binding := &v1alpha1.TenantBinding{ObjectMeta: metav1.ObjectMeta{Name: "acme"}, Spec: v1alpha1.TenantBindingSpec{
		TenantID: "acme", Namespaces: []string{"team-a"}, EffectivePolicyRef: &v1alpha1.PolicyReference{Name: "strict"}}}
	failing := func(kind client.Object) interceptor.Funcs {
		return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1alpha1.TenantBinding); ok == isBinding(kind) {
				return boom
			}
			return c.Get(ctx, key, obj, opts...)
		}}
	}
	cases := []struct {
		name  string
		funcs interceptor.Funcs
		want  string
	}{{
		name: "listing",
		funcs: interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return boom
		}},
		want: "listing the TenantBindings of namespace team-a: boom",
	}, {
		name:  "policy",
		funcs: failing(&v1alpha1.PlacementPolicy{}),
		want:  "reading PlacementPolicy strict: boom",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(binding).
				WithIndex(&v1alpha1.TenantBinding{}, indexBindingNamespace, func(o client.Object) []string {
					return o.(*v1alpha1.TenantBinding).Spec.Namespaces
				}).WithInterceptorFuncs(tc.funcs).Build()
			id, err := resolveIdentity(context.Background(), c, labelled)
			if err == nil || err.Error() != tc.want || !errors.Is(err, boom) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if id != (identity{}) {
				t.Errorf("identity %+v with an error, want none", id)
			}
		})
	}
}

func isBinding(o client.Object) bool {
	_, ok := o.(*v1alpha1.TenantBinding)
	return ok
}
