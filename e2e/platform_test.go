//go:build e2e

package e2e

import (
	"context"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

// TestPlatform installs the release once, in the lab profile with the
// controlled scheduler, the webhook, tenant RBAC and the run:ai and Volcano
// integrations, on a tenant whose pool is both workers, and runs on it, in
// order:
//
//   - admission (admissionSteps), make demo's attested phase included,
//     which installs the attestation controller for a while and restores
//     the lab's values;
//   - the trust boundaries (trustSteps), every attempt from its seat;
//   - tenant RBAC (tenantRBACSteps);
//   - a real DRA driver (realDRASteps): its allocations judged per device;
//   - real Volcano (realVolcanoSteps), last: from then on Volcano's
//     scheduler places every pod that names it, which the steps before
//     hold unbound on purpose.
//
// Each step creates what it owns; the release, the tenant and the binders'
// role are the suite's.
func TestPlatform(t *testing.T) {
	f := features.New("platform").
		Setup(setUpLab(withIntegrations))
	f = admissionSteps(f)
	f = trustSteps(f)
	f = tenantRBACSteps(f)
	f = realDRASteps(f)
	f = realVolcanoSteps(f)
	f = f.Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		tearDownRealVolcano(ctx, t, cfg)
		if l, ok := ctx.Value(labKey{}).(*lab.Lab); ok {
			tearDownTrust(ctx, t, l)
			if err := l.RevokeBinding(ctx, binderRole); err != nil {
				t.Errorf("revoking the binders' role: %v", err)
			}
		}
		return tearDownLab(ctx, t, cfg)
	})
	testenv.Test(t, f.Feature())
}
