package charts

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// nameCases are the name settings every values file is rendered with: the
// chart's own names, nameOverride alone (labels and names follow it), and
// both (labels follow nameOverride, names fullnameOverride).
var nameCases = []struct {
	name, override, fullOverride string
	wantName, wantFull           string
}{
	{name: "defaults", wantName: "xila-guard", wantFull: "xila-guard"},
	{name: "nameOverride", override: "acme", wantName: "acme", wantFull: "acme"},
	{name: "fullnameOverride", override: "acme", fullOverride: "acme-guard", wantName: "acme", wantFull: "acme-guard"},
}

// contractNames are the xila-guard names that no override changes: the
// scheduler profile protected pods name (an API of the platform, not an
// object), the GPUSettings the GPU device controller creates for itself, the chart's version label and the release's namespace.
var contractNames = regexp.MustCompile(`schedulerName:? xila-guard-scheduler\b|xila-guard-gpu-settings|helm\.sh/chart: xila-guard-[0-9]|` + regexp.QuoteMeta(releaseNS))

// A chart name that could be missed: xila-guard- and a component.
var chartToken = regexp.MustCompile(`xila-guard-[a-z0-9-]*[a-z0-9]`)

// TestNamesFollowOverrides renders every values file under each name
// setting and checks that the names the release creates follow it, and
// that every name one object gives of another (service accounts, roles,
// Services, Secrets, ConfigMaps, policies, selectors, and the service
// accounts the admission policies trust) is one the release renders.
func TestNamesFollowOverrides(t *testing.T) {
	for _, nc := range nameCases {
		t.Run(nc.name, func(t *testing.T) {
			type render struct {
				values string
				vals   map[string]any
				r      rendered
				objs   []object
			}
			var all []render
			// The service accounts some values file renders: a policy may
			// name one its own release does not run (the attested-evidence
			// policy trusts the attest controller's account even with the
			// controller off, so that no one may write), never one the
			// chart does not have.
			accounts := map[string]bool{}
			for _, values := range goldenCases {
				vals := withTestCA(t, readValues(t, values))
				if nc.override != "" {
					vals["nameOverride"] = nc.override
				}
				if nc.fullOverride != "" {
					vals["fullnameOverride"] = nc.fullOverride
				}
				r := mustRender(t, loadChart(t), vals)
				objs := objects(t, r.Manifest)
				for _, o := range objs {
					if o.Kind == "ServiceAccount" {
						accounts[o.name()] = true
					}
				}
				all = append(all, render{values, vals, r, objs})
			}
			for _, x := range all {
				for _, p := range checkNames(x.objs, nc.wantName, nc.wantFull) {
					t.Errorf("%s: %s", x.values, p)
				}
				secret, _ := field(x.vals, "webhook", "tls", "secretName").(string)
				for _, p := range checkReferences(x.objs, secret, accounts) {
					t.Errorf("%s: %s", x.values, p)
				}
				if nc.fullOverride == "" {
					continue
				}
				given := strings.Split(strings.TrimSpace(flatten(x.vals)), "\n")
				for _, line := range strings.Split(x.r.Manifest+"\n"+x.r.Notes, "\n") {
					if strings.HasPrefix(strings.TrimSpace(line), "#") {
						continue
					}
					for _, g := range given { // the values' own names are the user's
						if chartToken.MatchString(g) {
							line = strings.ReplaceAll(line, g, "")
						}
					}
					if tok := chartToken.FindString(contractNames.ReplaceAllString(line, "")); tok != "" {
						t.Errorf("%s: %s is not renamed under fullnameOverride: %s", x.values, tok, strings.TrimSpace(line))
					}
				}
			}
		})
	}
}

// checkNames returns what breaks the naming rule: every object is named
// <full> or <full>-<component>, and every app.kubernetes.io/name label, on
// an object or a pod template, is <name>-<component>.
func checkNames(objs []object, name, full string) []string {
	var out []string
	for _, o := range objs {
		if o.Kind == "CustomResourceDefinition" {
			continue // named by its API group
		}
		if n := o.name(); n != full && !strings.HasPrefix(n, full+"-") {
			out = append(out, fmt.Sprintf("%s: want a name starting with %s-", o, full))
		}
		for _, l := range []any{field(o.raw, "metadata", "labels"), field(o.raw, "spec", "template", "metadata", "labels")} {
			m, _ := l.(map[string]any)
			if v, ok := m["app.kubernetes.io/name"].(string); ok && !strings.HasPrefix(v, name+"-") {
				out = append(out, fmt.Sprintf("%s: label app.kubernetes.io/name=%s, want %s-<component>", o, v, name))
			}
		}
	}
	return out
}

// workload is a rendered pod template: its namespace, labels and spec.
type workload struct {
	of        object
	namespace string
	labels    labels.Set
	spec      map[string]any
}

func workloads(objs []object) []workload {
	var out []workload
	for _, o := range objs {
		spec, _ := field(o.raw, "spec", "template", "spec").(map[string]any)
		lbls, _ := field(o.raw, "spec", "template", "metadata", "labels").(map[string]any)
		if o.Kind == "Pod" {
			spec, _ = field(o.raw, "spec").(map[string]any)
			lbls, _ = field(o.raw, "metadata", "labels").(map[string]any)
		}
		if spec == nil {
			continue
		}
		set := labels.Set{}
		for k, v := range lbls {
			set[k] = fmt.Sprint(v)
		}
		ns, _ := o.Metadata["namespace"].(string)
		out = append(out, workload{of: o, namespace: ns, labels: set, spec: spec})
	}
	return out
}

var serviceAccountUser = regexp.MustCompile(`system:serviceaccount:([a-z0-9-]+):([a-z0-9-]+)`)

// checkReferences returns every name an object gives that the release
// does not render. Names outside the release are allowed where the chart
// documents them: system roles, the Secret the values name, the Secrets
// cert-manager or a component writes.
func checkReferences(objs []object, userSecret string, accounts map[string]bool) []string {
	have := map[string]bool{}
	key := func(kind, ns, name string) string { return kind + "/" + ns + "/" + name }
	for _, o := range objs {
		ns, _ := o.Metadata["namespace"].(string)
		have[key(o.Kind, ns, o.name())] = true
		if o.Kind == "Certificate" { // cert-manager writes the Secret
			if s, ok := field(o.raw, "spec", "secretName").(string); ok {
				have[key("Secret", ns, s)] = true
			}
		}
	}
	// Secrets that are not the chart's: the one the values name in TLS
	// mode secret, and the lab chain the attest controller writes
	// (--lab-chain-secret).
	if userSecret != "" {
		have[key("Secret", releaseNS, userSecret)] = true
	}
	for _, w := range workloads(objs) {
		for _, c := range containerList(w.spec) {
			for _, a := range stringList(field(c, "args")) {
				if v, ok := strings.CutPrefix(a, "--lab-chain-secret="); ok {
					if sns, name, ok := strings.Cut(v, "/"); ok {
						have[key("Secret", sns, name)] = true
					}
				}
			}
		}
	}
	var out []string
	missing := func(o object, what, kind, ns, name string) {
		if !have[key(kind, ns, name)] {
			out = append(out, fmt.Sprintf("%s: %s %s/%s/%s is not rendered", o, what, kind, ns, name))
		}
	}
	ws := workloads(objs)
	for _, w := range ws {
		if sa, ok := w.spec["serviceAccountName"].(string); ok {
			missing(w.of, "serviceAccountName", "ServiceAccount", w.namespace, sa)
		}
		for _, v := range anyList(w.spec["volumes"]) {
			if s, ok := field(v, "secret", "secretName").(string); ok {
				missing(w.of, "volume", "Secret", w.namespace, s)
			}
			if s, ok := field(v, "configMap", "name").(string); ok {
				missing(w.of, "volume", "ConfigMap", w.namespace, s)
			}
		}
	}
	for _, o := range objs {
		ns, _ := o.Metadata["namespace"].(string)
		switch o.Kind {
		case "RoleBinding", "ClusterRoleBinding":
			kind, _ := field(o.raw, "roleRef", "kind").(string)
			name, _ := field(o.raw, "roleRef", "name").(string)
			if !strings.HasPrefix(name, "system:") && name != "extension-apiserver-authentication-reader" {
				if kind == "ClusterRole" {
					missing(o, "roleRef", kind, "", name)
				} else {
					missing(o, "roleRef", kind, ns, name)
				}
			}
			for _, s := range anyList(field(o.raw, "subjects")) {
				if field(s, "kind") == "ServiceAccount" {
					missing(o, "subject", "ServiceAccount", fmt.Sprint(field(s, "namespace")), fmt.Sprint(field(s, "name")))
				}
			}
		case "ValidatingAdmissionPolicyBinding":
			missing(o, "policyName", "ValidatingAdmissionPolicy", "", fmt.Sprint(field(o.raw, "spec", "policyName")))
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			for _, wh := range anyList(field(o.raw, "webhooks")) {
				if svc, ok := field(wh, "clientConfig", "service").(map[string]any); ok {
					missing(o, "webhook "+fmt.Sprint(field(wh, "name")), "Service", fmt.Sprint(svc["namespace"]), fmt.Sprint(svc["name"]))
				}
			}
		case "Service":
			if sel, ok := field(o.raw, "spec", "selector").(map[string]any); ok && !selects(ws, ns, sel) {
				out = append(out, fmt.Sprintf("%s: selector %v selects no rendered pod template", o, sel))
			}
		case "PodMonitor", "NetworkPolicy":
			path := []any{"spec", "selector", "matchLabels"}
			if o.Kind == "NetworkPolicy" {
				path = []any{"spec", "podSelector", "matchLabels"}
			}
			if sel, ok := field(o.raw, path...).(map[string]any); ok && len(sel) > 0 && !selects(ws, ns, sel) {
				out = append(out, fmt.Sprintf("%s: selector %v selects no rendered pod template", o, sel))
			}
		}
	}
	// The service accounts the admission policies, the webhook's flags
	// and the RBAC subjects name as users.
	for _, o := range objs {
		seen := map[string]bool{}
		for _, m := range serviceAccountUser.FindAllStringSubmatch(flatten(o.raw), -1) {
			if m[1] == releaseNS && !seen[m[0]] && !accounts[m[2]] {
				seen[m[0]] = true
				out = append(out, fmt.Sprintf("%s: user %s is no service account of the chart", o, m[0]))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// selects reports whether a label selector matches a pod template of the namespace.
func selects(ws []workload, ns string, sel map[string]any) bool {
	want := labels.Set{}
	for k, v := range sel {
		want[k] = fmt.Sprint(v)
	}
	s := labels.SelectorFromSet(want)
	return slices.ContainsFunc(ws, func(w workload) bool { return w.namespace == ns && s.Matches(w.labels) })
}

func containerList(spec map[string]any) []any {
	return append(anyList(spec["initContainers"]), anyList(spec["containers"])...)
}

func anyList(v any) []any { l, _ := v.([]any); return l }

func stringList(v any) []string {
	var out []string
	for _, s := range anyList(v) {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// flatten is every string of a decoded object, one per line.
func flatten(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x)
			b.WriteByte('\n')
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k])
			}
		}
	}
	walk(v)
	return b.String()
}
