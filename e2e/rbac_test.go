//go:build e2e

package e2e

import (
	"context"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

// tenantRBACSteps send, on the platform (TestPlatform), the matrix of
// real requests as the tenant's user (impersonated): the user
// manages pods and workloads in the tenant's namespace and is refused by
// the authorizer everything else — the guard kinds, pods/binding, nodes
// and other namespaces.
func tenantRBACSteps(f *features.FeatureBuilder) *features.FeatureBuilder {
	return f.
		Assess("G-TENANT-RBAC tenant user: own pods allowed, everything else denied", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			matrix, err := l.TenantRBACMatrix(ctx, l.Tenant, l.User)
			if err != nil {
				t.Fatal(err)
			}
			denied := 0
			for _, a := range matrix {
				if !a.OK() {
					want := "ALLOWED"
					if !a.WantAllowed {
						want = "DENIED by RBAC"
					}
					t.Errorf("as %s: %s, want %s", l.User, a, want)
				}
				if !a.WantAllowed {
					denied++
				}
			}
			if denied < 17 {
				t.Errorf("the matrix checks %d refusals, want the guard kinds (list each; watch, get, create, patch and delete some; their status), PolicyReports, pods/binding, nodes and other namespaces", denied)
			}
			return ctx
		}).
		Assess("tenant RBAC: a user without the role is refused in the tenant's namespace", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			l := labFrom(ctx, t)
			matrix, err := l.TenantRBACMatrix(ctx, l.Tenant, "someone-else")
			if err != nil {
				t.Fatal(err)
			}
			if a := matrix[0]; a.Allowed || !lab.RBACDenial(a.Err) {
				t.Errorf("someone-else: %s, want DENIED: the RoleBinding must name only the tenant's subjects", a)
			}
			return ctx
		})
}
