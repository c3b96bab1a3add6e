package charts

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
)

// withoutIntegrations is the chart as it was before orchestrator
// integrations: no template of theirs, no value and no schema entry.
func withoutIntegrations(t *testing.T) *chart.Chart {
	t.Helper()
	ch := loadChart(t)
	ch.Templates = slices.DeleteFunc(ch.Templates, func(f *chart.File) bool {
		return f.Name == "templates/orchestrator-integrations.yaml"
	})
	delete(ch.Values, "orchestratorIntegrations")
	var schema map[string]any
	if err := json.Unmarshal(ch.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	delete(schema["properties"].(map[string]any), "orchestratorIntegrations")
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	ch.Schema = b
	return ch
}

// TestEmptyIntegrationsRenderLikeNoFeature: orchestratorIntegrations: []
// renders byte for byte what the chart renders without the feature.
func TestEmptyIntegrationsRenderLikeNoFeature(t *testing.T) {
	for _, name := range []string{"default", "enforcement-only", "enforcement", "enforcement-lab", "tenant-rbac", "cert-manager"} {
		t.Run(name, func(t *testing.T) {
			with := withTestCA(t, readValues(t, name))
			with["orchestratorIntegrations"] = []any{}
			got := mustRender(t, loadChart(t), with)
			want := mustRender(t, withoutIntegrations(t), withTestCA(t, readValues(t, name)))
			if got != want {
				t.Errorf("orchestratorIntegrations: [] changes the render:\n%s", lineDiff(want.Manifest+want.Notes, got.Manifest+got.Notes))
			}
		})
	}
}

// TestMinimalWebhookWithoutEnforcement: an integration with enforcement off
// renders the webhook alone — its ServiceAccount, read-only RBAC,
// Deployment, Service and TLS — and the integration's configuration.
func TestMinimalWebhookWithoutEnforcement(t *testing.T) {
	for _, mode := range []string{"generate", "secret", "certManager"} {
		t.Run(mode, func(t *testing.T) {
			vals := readValues(t, "integrations-only")
			vals["webhook"].(map[string]any)["tls"] = map[string]any{"mode": mode, "secretName": "given", "caBundle": testCA(t)}
			objs := objects(t, mustRender(t, loadChart(t), vals).Manifest)
			want := []string{
				"ServiceAccount/xila-guard-webhook",
				"ClusterRole/xila-guard-webhook",
				"ClusterRoleBinding/xila-guard-webhook",
				"Service/xila-guard-webhook",
				"Deployment/xila-guard-webhook",
				"ValidatingWebhookConfiguration/xila-guard-integration-volcano",
				// The hook that arms it once a replica answers.
				"ServiceAccount/xila-guard-webhook-arm",
				"ClusterRole/xila-guard-webhook-arm",
				"ClusterRoleBinding/xila-guard-webhook-arm",
				"Job/xila-guard-webhook-arm",
			}
			switch mode {
			case "generate":
				want = append(want, "Secret/xila-guard-webhook-tls")
			case "certManager":
				want = append(want, "Issuer/xila-guard-webhook-selfsigned", "Certificate/xila-guard-webhook-ca",
					"Issuer/xila-guard-webhook-ca", "Certificate/xila-guard-webhook")
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.String())
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("rendered %v\nwant      %v", got, want)
			}
			cr := find(t, objs, "ClusterRole", "xila-guard-webhook")
			for _, rule := range field(cr.raw, "rules").([]any) {
				for _, verb := range field(rule, "verbs").([]any) {
					if !slices.Contains([]any{"get", "list", "watch"}, verb) {
						t.Errorf("webhook ClusterRole grants %q: want read-only", verb)
					}
				}
			}
			if v, ok := flagValue(webhookArgs(t, objs), "profile"); !ok || v != "production" {
				t.Errorf("--profile=%q (set: %v): want production, the in-process evaluator's default", v, ok)
			}
		})
	}
}

// TestIntegrationsAreData: each enabled entry renders its own
// configuration selecting its workloads, and its scheduler joins the
// webhook's accepted set; disabled entries render nothing.
func TestIntegrationsAreData(t *testing.T) {
	objs := objects(t, mustRender(t, loadChart(t), withTestCA(t, readValues(t, "enforcement-integrations"))).Manifest)
	if got := schedulerProfiles(t, webhookArgs(t, objs)); len(got) != 2 || len(got["runai-scheduler"]) != 1 || len(got["volcano"]) != 1 {
		t.Errorf("--scheduler-profile: %v, want one selector each for runai-scheduler and volcano", got)
	}
	binders, _ := flagValue(webhookArgs(t, objs), "binder-serviceaccounts")
	if want := "system:serviceaccount:" + releaseNS + ":xila-guard-scheduler,system:serviceaccount:runai:runai-scheduler,system:serviceaccount:volcano-system:volcano-scheduler"; binders != want {
		t.Errorf("--binder-serviceaccounts=%q, want %q", binders, want)
	}
	// run:ai's bindings are reported only (bindEnforcement: Report);
	// Volcano's are enforced, the default.
	if got, _ := flagValue(webhookArgs(t, objs), "report-binders"); got != "system:serviceaccount:runai:runai-scheduler" {
		t.Errorf("--report-binders=%q, want run:ai's binder only", got)
	}
	if v, ok := flagValue(webhookArgs(t, objs), "trusted-serviceaccounts"); ok {
		t.Errorf("--trusted-serviceaccounts=%q with none configured", v)
	}
	for name, selector := range map[string]string{
		"runai":   "matchExpressions:\n- key: runai/queue\n  operator: Exists",
		"volcano": "matchExpressions:\n- key: volcano.sh/job-name\n  operator: Exists",
	} {
		vwc := find(t, objs, "ValidatingWebhookConfiguration", "xila-guard-integration-"+name)
		hooks := field(vwc.raw, "webhooks").([]any)
		if len(hooks) != 1 {
			t.Fatalf("%s: %d webhooks, want 1", vwc, len(hooks))
		}
		if got := toYAML(t, field(hooks[0], "objectSelector")); got != selector {
			t.Errorf("%s objectSelector:\n%s\nwant\n%s", vwc, got, selector)
		}
		if got := field(hooks[0], "clientConfig", "service", "path"); got != "/validate-pods" {
			t.Errorf("%s path %v, want /validate-pods", vwc, got)
		}
	}
	for _, o := range objs {
		if strings.Contains(o.name(), "yunikorn") {
			t.Errorf("disabled integration rendered %s", o)
		}
	}
}

// TestWebhookConfigurations checks what every webhook configuration must
// hold: fail closed (created Ignore, and armed by the hook Job, which names
// every one of them; Fail from the start with armAfterReady off), a short
// timeout, the platform's and the system namespaces exempt, and the CA of
// the serving certificate.
func TestWebhookConfigurations(t *testing.T) {
	vals := withTestCA(t, readValues(t, "enforcement-integrations"))
	objs := objects(t, mustRender(t, loadChart(t), vals).Manifest)
	var armJob []string
	for _, o := range objs {
		if o.Kind == "Job" && o.name() == "xila-guard-webhook-arm" {
			for _, a := range field(o.raw, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["args"].([]any) {
				if v, ok := strings.CutPrefix(a.(string), "--validating="); ok {
					armJob = strings.Split(v, ",")
				}
			}
		}
	}
	webhook := vals["webhook"].(map[string]any)
	webhook["armAfterReady"] = false
	unarmed := objects(t, mustRender(t, loadChart(t), vals).Manifest)
	for _, o := range unarmed {
		if o.Kind == "Job" {
			t.Errorf("armAfterReady false renders %s", o)
		}
		if o.Kind != "ValidatingWebhookConfiguration" {
			continue
		}
		for _, h := range field(o.raw, "webhooks").([]any) {
			if got := field(h, "failurePolicy"); got != "Fail" {
				t.Errorf("armAfterReady false: %s failurePolicy %v, want Fail", o, got)
			}
		}
	}
	wantCA := testCA(t)
	n := 0
	var configs []string
	for _, o := range objs {
		if o.Kind != "ValidatingWebhookConfiguration" {
			continue
		}
		configs = append(configs, o.name())
		for _, h := range field(o.raw, "webhooks").([]any) {
			n++
			if got := field(h, "failurePolicy"); got != "Ignore" {
				t.Errorf("%s failurePolicy %v at first install, want Ignore until the hook arms it", o, got)
			}
			if got, _ := field(h, "timeoutSeconds").(float64); got < 1 || got > 10 {
				t.Errorf("%s timeoutSeconds %v, want 1..10", o, got)
			}
			if got := field(h, "sideEffects"); got != "None" {
				t.Errorf("%s sideEffects %v, want None", o, got)
			}
			if got := decodeB64(t, field(h, "clientConfig", "caBundle")); got != wantCA {
				t.Errorf("%s caBundle is not the given CA", o)
			}
			if field(h, "rules", 0, "scope") == "Cluster" {
				continue
			}
			exempt := toYAML(t, field(h, "namespaceSelector"))
			for _, ns := range []string{releaseNS, "kube-system", "kube-public", "kube-node-lease"} {
				if !strings.Contains(exempt, "- "+ns+"\n") && !strings.HasSuffix(exempt, "- "+ns) {
					t.Errorf("%s namespaceSelector does not exempt %s:\n%s", o, ns, exempt)
				}
			}
			if !strings.Contains(exempt, "operator: NotIn") {
				t.Errorf("%s namespaceSelector is not an exemption list:\n%s", o, exempt)
			}
		}
	}
	if n != 8 {
		t.Errorf("%d webhooks, want 8 (pods and bindings of tenant and other namespaces, tenant pods' addresses, nodes, two integrations)", n)
	}
	slices.Sort(configs)
	slices.Sort(armJob)
	if !slices.Equal(configs, armJob) {
		t.Errorf("the arm Job arms %v, want every configuration %v", armJob, configs)
	}
	pods := find(t, objs, "ValidatingWebhookConfiguration", "xila-guard-pods")
	if got := toYAML(t, field(pods.raw, "webhooks", 0, "rules", 0, "resources")); got != "- pods\n- pods/ephemeralcontainers" {
		t.Errorf("pod rules cover %s, want pods and pods/ephemeralcontainers", got)
	}
	if got := toYAML(t, field(pods.raw, "webhooks", 0, "rules", 0, "operations")); got != "- CREATE\n- UPDATE" {
		t.Errorf("pod rules operations %s, want CREATE and UPDATE", got)
	}
	if got := toYAML(t, field(pods.raw, "webhooks", 2, "rules", 0, "resources")) + " " + toYAML(t, field(pods.raw, "webhooks", 2, "rules", 0, "operations")); got != "- pods/status - UPDATE" {
		t.Errorf("pod address rules %s, want UPDATE of pods/status", got)
	}
	d := find(t, objs, "Deployment", "xila-guard-webhook")
	if got := field(d.raw, "spec", "replicas"); got != float64(2) {
		t.Errorf("webhook replicas %v, want 2", got)
	}
	sc := field(d.raw, "spec", "template", "spec", "containers", 0, "securityContext")
	if field(sc, "runAsNonRoot") != true || field(sc, "allowPrivilegeEscalation") != false || field(sc, "readOnlyRootFilesystem") != true {
		t.Errorf("webhook securityContext is not restricted: %v", sc)
	}
	if field(d.raw, "spec", "template", "spec", "containers", 0, "resources", "requests") == nil {
		t.Error("webhook has no resource requests")
	}
	pdb := find(t, objs, "PodDisruptionBudget", "xila-guard-webhook")
	if got := field(pdb.raw, "spec", "minAvailable"); got != float64(1) {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 1", got)
	}
}

// TestInvalidValuesFail: values that would open a door, or that the
// webhook cannot run with, stop the install with a message that says why.
func TestInvalidValuesFail(t *testing.T) {
	integration := func(mod func(map[string]any)) map[string]any {
		in := map[string]any{"name": "volcano", "schedulerName": "volcano",
			"workloadSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}}}
		mod(in)
		return map[string]any{"orchestratorIntegrations": []any{in}}
	}
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"empty workload selector", integration(func(in map[string]any) { in["workloadSelector"] = map[string]any{} }), "workloadSelector"},
		{"no scheduler name", integration(func(in map[string]any) { delete(in, "schedulerName") }), "schedulerName"},
		{"bad integration name", integration(func(in map[string]any) { in["name"] = "Volcano!" }), "name"},
		{"duplicate integration", map[string]any{"orchestratorIntegrations": []any{
			map[string]any{"name": "v", "schedulerName": "a", "workloadSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}}},
			map[string]any{"name": "v", "schedulerName": "b", "workloadSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}}},
		}}, `name "v" appears twice`},
		{"secret mode without secret", map[string]any{
			"webhook": map[string]any{"enabled": true, "tls": map[string]any{"mode": "secret", "caBundle": "-----BEGIN CERTIFICATE-----"}}}, "secretName"},
		{"secret mode without CA", map[string]any{
			"webhook": map[string]any{"enabled": true, "tls": map[string]any{"mode": "secret", "secretName": "s"}}}, "caBundle"},
		{"unknown TLS mode", map[string]any{"webhook": map[string]any{"tls": map[string]any{"mode": "selfSigned"}}}, "mode"},
		{"long timeout", map[string]any{"webhook": map[string]any{"timeoutSeconds": 31}}, "timeoutSeconds"},
		{"an evaluator timeout of the webhook", map[string]any{"webhook": map[string]any{"evalTimeoutMs": 2000}}, "evalTimeoutMs"},
		{"tenant without subjects", map[string]any{"tenantRBAC": map[string]any{"enabled": true,
			"tenants": []any{map[string]any{"name": "a", "namespaces": []any{"a"}, "subjects": []any{}}}}}, "subjects"},
		{"unknown section", map[string]any{"webhooks": map[string]any{}}, "webhooks"},
		{"unknown profile", map[string]any{"enforcement": map[string]any{"enabled": true, "profile": "dev"}}, "profile"},
		{"webhook GOGC not a number", map[string]any{"webhook": map[string]any{"go": map[string]any{"gogc": "lazy", "memoryLimit": "200MiB"}}}, "gogc"},
		{"webhook memory limit without unit syntax", map[string]any{"webhook": map[string]any{"go": map[string]any{"gogc": 400, "memoryLimit": "200M"}}}, "memoryLimit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(loadChart(t), tc.vals)
			if err == nil {
				t.Fatal("the chart rendered; want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestTenantRoleGrantsNoBypass reads the tenant ClusterRoles, the base one
// and those of every shipped profile's tenantResources: nothing on the
// guard kinds, bindings, nodes or cluster-scoped objects, no wildcard,
// and, in the profiles' roles, none of Kubernetes' own groups. Every
// tenant namespace binds each of them, and nothing else. The e2e suite
// proves the same with real requests, and TestIntegrationTenantResources
// against a real API server's authorizer.
func TestTenantRoleGrantsNoBypass(t *testing.T) {
	vals := readValues(t, "tenant-rbac")
	profiles := readProfiles(t)
	var integrations []any
	wantRoles := []string{"xila-guard-tenant"}
	for _, name := range slices.Sorted(maps.Keys(profiles)) {
		in := profiles[name].Integration
		integrations = append(integrations, in)
		if rules, _ := in["tenantResources"].([]any); len(rules) > 0 {
			wantRoles = append(wantRoles, "xila-guard-tenant-"+name)
		}
	}
	slices.Sort(wantRoles)
	vals["orchestratorIntegrations"] = integrations
	objs := objects(t, mustRender(t, loadChart(t), vals).Manifest)
	roles := tenantRoles(objs)
	if got := slices.Sorted(maps.Keys(roles)); !slices.Equal(got, wantRoles) {
		t.Errorf("tenant ClusterRoles %v, want %v", got, wantRoles)
	}
	for name, role := range roles {
		for _, rule := range field(role.raw, "rules").([]any) {
			for _, b := range ruleBypasses(rule) {
				t.Errorf("%s grants %s", role, b)
			}
			if name == "xila-guard-tenant" {
				continue
			}
			for _, g := range strs(field(rule, "apiGroups")) {
				if kubernetesGroup(g) {
					t.Errorf("%s grants kinds of Kubernetes' own group %q: the base tenant role decides those", role, g)
				}
			}
		}
	}
	bound := tenantBindings(t, objs)
	if got := slices.Sorted(maps.Keys(bound)); !slices.Equal(got, []string{"acme-serve", "acme-train", "globex"}) {
		t.Errorf("RoleBindings in %v, want acme-serve, acme-train and globex", got)
	}
	for ns, got := range bound {
		if !slices.Equal(got, wantRoles) {
			t.Errorf("%s binds %v, want %v", ns, got, wantRoles)
		}
	}
}

// TestEnforcementAloneRendersNoWebhook: turning enforcement on renders the
// evaluator and the scheduler and nothing of the webhook, which is a
// feature of its own.
func TestEnforcementAloneRendersNoWebhook(t *testing.T) {
	for _, o := range objects(t, mustRender(t, loadChart(t), readValues(t, "enforcement-only")).Manifest) {
		if strings.Contains(o.name(), "webhook") || o.Kind == "ValidatingWebhookConfiguration" {
			t.Errorf("enforcement alone rendered %s", o)
		}
	}
}

// TestGoRuntimeSettings: the webhook and the evaluator get the Go runtime's
// settings from their "go" values, and none when it is null.
func TestGoRuntimeSettings(t *testing.T) {
	core := func(v map[string]any) map[string]any {
		e := v["enforcement"].(map[string]any)
		if e["core"] == nil {
			e["core"] = map[string]any{}
		}
		c := e["core"].(map[string]any)
		c["enabled"] = true
		return c
	}
	for _, tc := range []struct {
		name   string
		values func(map[string]any)
		want   map[string]string
	}{
		{"defaults", func(v map[string]any) { core(v) }, map[string]string{"webhook": "400/200MiB", "core": "400/200MiB"}},
		{"webhook set", func(v map[string]any) {
			core(v)
			v["webhook"].(map[string]any)["go"] = map[string]any{"gogc": "off", "memoryLimit": "96MiB"}
		}, map[string]string{"webhook": "off/96MiB", "core": "400/200MiB"}},
		{"both null", func(v map[string]any) {
			v["webhook"].(map[string]any)["go"] = nil
			core(v)["go"] = nil
		}, map[string]string{"webhook": "", "core": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := withTestCA(t, readValues(t, "enforcement"))
			tc.values(vals)
			objs := objects(t, mustRender(t, loadChart(t), vals).Manifest)
			for container, want := range tc.want {
				d := find(t, objs, "Deployment", "xila-guard-"+container)
				var spec struct {
					Spec struct {
						Template struct {
							Spec struct {
								Containers []struct {
									Env []struct{ Name, Value string }
								}
							}
						}
					}
				}
				b, err := json.Marshal(d.raw)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, &spec); err != nil {
					t.Fatal(err)
				}
				env := map[string]string{}
				for _, e := range spec.Spec.Template.Spec.Containers[0].Env {
					env[e.Name] = e.Value
				}
				got := ""
				if len(env) > 0 {
					got = env["GOGC"] + "/" + env["GOMEMLIMIT"]
				}
				if got != want {
					t.Errorf("%s: GOGC/GOMEMLIMIT = %q, want %q", container, got, want)
				}
			}
		})
	}
}

// TestPoolChangeCondition: the nodes webhook's match condition, as the
// chart renders it for the default pool label, is the expression that the
// webhook's integration tests run against a real API server
// (testdata/pool-change.cel); and so is the allocations webhook's
// (testdata/hands-out-a-device.cel).
func TestPoolChangeCondition(t *testing.T) {
	devices := withTestCA(t, readValues(t, "enforcement"))
	devices["webhook"].(map[string]any)["devices"] = true
	for _, c := range []struct {
		file, config string
		hook         int
		values       map[string]any
	}{
		{"pool-change.cel", "xila-guard-nodes", 0, withTestCA(t, readValues(t, "enforcement"))},
		{"hands-out-a-device.cel", "xila-guard-devices", 1, devices},
	} {
		want, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		objs := objects(t, mustRender(t, loadChart(t), c.values).Manifest)
		cfg := find(t, objs, "ValidatingWebhookConfiguration", c.config)
		var hooks struct {
			Webhooks []struct {
				MatchConditions []struct{ Name, Expression string } `json:"matchConditions"`
			} `json:"webhooks"`
		}
		b, err := json.Marshal(cfg.raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &hooks); err != nil {
			t.Fatal(err)
		}
		if len(hooks.Webhooks) != c.hook+1 || len(hooks.Webhooks[c.hook].MatchConditions) != 1 {
			t.Fatalf("%s: want webhook %d with one match condition, got %+v", c.config, c.hook, hooks.Webhooks)
		}
		if got := hooks.Webhooks[c.hook].MatchConditions[0].Expression; got != strings.TrimSpace(string(want)) {
			t.Errorf("the rendered match condition differs from testdata/%s; update the file:\n%s", c.file, got)
		}
	}
}
