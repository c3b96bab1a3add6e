package charts

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// profile is one file of ../profiles: an orchestrator, the chart values
// entry that integrates it, and how that entry was verified.
type profile struct {
	Orchestrator string         `json:"orchestrator"`
	Integration  map[string]any `json:"integration"`
	Verification struct {
		Status     string `json:"status"`
		Method     string `json:"method"`
		Unverified string `json:"unverified"`
	} `json:"verification"`
}

// verificationStatuses are the honest answers to "how do we know".
var verificationStatuses = []string{"verified", "shape-verified", "unverified"}

func readProfiles(t *testing.T) map[string]profile {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "profiles", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]profile{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p profile
		if err := yaml.UnmarshalStrict(b, &p); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		out[strings.TrimSuffix(filepath.Base(f), ".yaml")] = p
	}
	return out
}

// TestProfiles: every profile parses strictly, has the required fields,
// and renders through the chart as an integration whose configuration
// selects its workloads and whose scheduler the webhook accepts.
func TestProfiles(t *testing.T) {
	profiles := readProfiles(t)
	for _, want := range []string{"runai", "kai", "volcano", "kueue", "yunikorn"} {
		if _, ok := profiles[want]; !ok {
			t.Errorf("profiles/%s.yaml is missing", want)
		}
	}
	wantSchedulers := map[string]string{"runai": "runai-scheduler", "kai": "kai-scheduler", "volcano": "volcano", "yunikorn": "yunikorn", "kueue": "xila-guard-scheduler"}
	var all []any
	for file, p := range profiles {
		t.Run(file, func(t *testing.T) {
			in := p.Integration
			if p.Orchestrator == "" {
				t.Error("orchestrator is empty")
			}
			if in["name"] != file {
				t.Errorf("integration.name %v, want the file's name %q", in["name"], file)
			}
			if want, ok := wantSchedulers[file]; ok && in["schedulerName"] != want {
				t.Errorf("schedulerName %v, want %s", in["schedulerName"], want)
			}
			if !slices.Contains(verificationStatuses, p.Verification.Status) {
				t.Errorf("verification.status %q, want one of %v", p.Verification.Status, verificationStatuses)
			}
			if p.Verification.Method == "" {
				t.Error("verification.method is empty: say how the profile was checked")
			}
			if p.Verification.Status != "verified" && p.Verification.Unverified == "" {
				t.Error("verification.unverified is empty: say what was not checked")
			}
			rules, ok := in["tenantResources"].([]any)
			if !ok {
				t.Error("integration.tenantResources is missing: list the orchestrator's workload kinds its tenants create, or [] for none")
			}
			vals := map[string]any{"orchestratorIntegrations": []any{in}}
			objs := objects(t, mustRender(t, loadChart(t), vals).Manifest)
			if got := tenantRoles(objs); len(got) != 0 {
				t.Errorf("tenant roles %v rendered with tenant RBAC off", slices.Collect(maps.Keys(got)))
			}
			// With tenant RBAC, the profile's tenant kinds are granted in
			// the tenant's namespaces, and nothing that bypasses the guard.
			tenantObjs := objects(t, mustRender(t, loadChart(t), tenantValues(true, in)).Manifest)
			role, granted := tenantRoles(tenantObjs)["xila-guard-tenant-"+file]
			switch {
			case len(rules) == 0 && granted:
				t.Errorf("%s rendered for a profile with no tenantResources", role)
			case len(rules) > 0 && !granted:
				t.Errorf("no ClusterRole xila-guard-tenant-%s for the profile's tenantResources", file)
			case granted:
				if got, want := toYAML(t, field(role.raw, "rules")), toYAML(t, rules); got != want {
					t.Errorf("%s rules\n%s\nwant the profile's tenantResources\n%s", role, got, want)
				}
				for _, rule := range rules {
					for _, b := range ruleBypasses(rule) {
						t.Errorf("tenantResources grant %s", b)
					}
				}
				for ns, got := range tenantBindings(t, tenantObjs) {
					if !slices.Contains(got, role.name()) {
						t.Errorf("%s binds %v, not %s", ns, got, role.name())
					}
				}
			}
			vwc := find(t, objs, "ValidatingWebhookConfiguration", "xila-guard-integration-"+file)
			if got, want := toYAML(t, field(vwc.raw, "webhooks", 0, "objectSelector")), toYAML(t, in["workloadSelector"]); got != want {
				t.Errorf("objectSelector\n%s\nwant the workload selector\n%s", got, want)
			}
			got := schedulerProfiles(t, webhookArgs(t, objs))
			if name, _ := in["schedulerName"].(string); name != "xila-guard-scheduler" {
				want := labelSelector(t, in["workloadSelector"])
				if len(got[name]) != 1 || got[name][0] != want {
					t.Errorf("--scheduler-profile of %s: %v, want the workload selector %q", name, got[name], want)
				}
			} else if len(got) != 0 {
				t.Errorf("--scheduler-profile %v for the controlled scheduler's profile", got)
			}
		})
		all = append(all, p.Integration)
	}
	// Every profile at once: one configuration each, one accepted set.
	objs := objects(t, mustRender(t, loadChart(t), map[string]any{"orchestratorIntegrations": all}).Manifest)
	n := 0
	for _, o := range objs {
		if o.Kind == "ValidatingWebhookConfiguration" {
			n++
		}
	}
	if n != len(profiles) {
		t.Errorf("%d webhook configurations for %d profiles", n, len(profiles))
	}
	got := schedulerProfiles(t, webhookArgs(t, objs))
	for file, want := range wantSchedulers {
		if _, ok := got[want]; want != "xila-guard-scheduler" && !ok {
			t.Errorf("--scheduler-profile %v lacks %s's %s", got, file, want)
		}
	}
}

// TestProfilesByName: orchestratorProfiles enables a profile the chart
// ships by name, rendering exactly what its integration entry renders
// through orchestratorIntegrations; the chart's copy is the repository's
// profiles/; an unknown name fails with the known ones.
func TestProfilesByName(t *testing.T) {
	profiles := readProfiles(t)
	var names []string
	for name, p := range profiles {
		names = append(names, name)
		want, err := os.ReadFile(filepath.Join("..", "profiles", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("xila-guard", "profiles", name+".yaml"))
		if err != nil || string(got) != string(want) {
			t.Errorf("xila-guard/profiles/%s.yaml differs from profiles/%s.yaml (%v): run make generate", name, name, err)
		}
		byName := mustRender(t, loadChart(t), with(tenantValues(true), "orchestratorProfiles", []any{name}))
		byEntry := mustRender(t, loadChart(t), with(tenantValues(true), "orchestratorIntegrations", []any{p.Integration}))
		// TLS mode generate makes a new certificate in every render.
		a, b := generatedPEM.ReplaceAllString(byName.Manifest, "${1}<generated>"), generatedPEM.ReplaceAllString(byEntry.Manifest, "${1}<generated>")
		if a != b {
			t.Errorf("orchestratorProfiles [%s] renders otherwise than its integration entry:\n%s", name, lineDiff(b, a))
		}
	}
	slices.Sort(names)
	both := mustRender(t, loadChart(t), map[string]any{"orchestratorProfiles": []any{"volcano", "runai"}})
	for _, name := range []string{"volcano", "runai"} {
		find(t, objects(t, both.Manifest), "ValidatingWebhookConfiguration", "xila-guard-integration-"+name)
	}
	_, err := render(loadChart(t), map[string]any{"orchestratorProfiles": []any{"volcano", "slurm"}})
	if want := `unknown profile "slurm"; the chart ships ` + strings.Join(names, ", "); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("an unknown profile: %v, want an error containing %q", err, want)
	}
	_, err = render(loadChart(t), map[string]any{"orchestratorProfiles": []any{"volcano"},
		"orchestratorIntegrations": []any{profiles["volcano"].Integration}})
	if err == nil || !strings.Contains(err.Error(), `name "volcano" appears twice`) {
		t.Errorf("a profile enabled twice: %v, want a duplicate-name error", err)
	}
}
