package charts

import (
	"reflect"
	"strings"
	"testing"
)

// TestVMMigrations: confidential.vmMigrations renders the
// ValidatingWebhookConfiguration xila-guard-migrations, failing closed,
// for KubeVirt's VirtualMachineInstanceMigrations in the tenants'
// namespaces only, pointing at the webhook's /validate-migrations; off,
// it renders nothing; without the webhook the render fails.
func TestVMMigrations(t *testing.T) {
	objs := objects(t, mustRender(t, loadChart(t), withTestCA(t, readValues(t, "enforcement"))).Manifest)
	cfg := find(t, objs, "ValidatingWebhookConfiguration", "xila-guard-migrations")
	hooks, _ := field(cfg.raw, "webhooks").([]any)
	if len(hooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(hooks))
	}
	h := hooks[0]
	for path, want := range map[string]any{
		"name":                      "migrations.webhook.guard.xila.us",
		"failurePolicy":             "Ignore", // until the hook Job arms it
		"sideEffects":               "None",
		"clientConfig.service.path": "/validate-migrations",
		"clientConfig.service.name": "xila-guard-webhook",
	} {
		var keys []any
		for _, k := range strings.Split(path, ".") {
			keys = append(keys, k)
		}
		if got := field(h, keys...); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	wantRules := []any{map[string]any{
		"apiGroups": []any{"kubevirt.io"}, "apiVersions": []any{"*"}, "operations": []any{"CREATE", "UPDATE"},
		"resources": []any{"virtualmachineinstancemigrations"}, "scope": "Namespaced",
	}}
	if got := field(h, "rules"); !reflect.DeepEqual(got, wantRules) {
		t.Errorf("rules = %v, want %v", got, wantRules)
	}
	exprs, _ := field(h, "namespaceSelector", "matchExpressions").([]any)
	tenantOnly := false
	for _, e := range exprs {
		if field(e, "key") == "guard.xila.us/tenant" && field(e, "operator") == "Exists" {
			tenantOnly = true
		}
	}
	if !tenantOnly {
		t.Errorf("namespaceSelector %v does not select the tenant namespaces only", exprs)
	}

	vals := readValues(t, "enforcement")
	vals["confidential"].(map[string]any)["vmMigrations"] = false
	for _, o := range objects(t, mustRender(t, loadChart(t), withTestCA(t, vals)).Manifest) {
		if o.name() == "xila-guard-migrations" {
			t.Errorf("%s rendered with confidential.vmMigrations off", o)
		}
	}

	vals = readValues(t, "gpu-devices")
	vals["confidential"] = map[string]any{"vmMigrations": true}
	if _, err := render(loadChart(t), withTestCA(t, vals)); err == nil || !strings.Contains(err.Error(), "confidential.vmMigrations needs webhook.enabled") {
		t.Errorf("vmMigrations without the webhook: %v", err)
	}
}
