package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/yaml"
)

// Input is what the operator asks for, before it becomes chart values.
type Input struct {
	// Values is a YAML document of chart values; empty means none.
	Values string
	// Profiles are appended to the chart's orchestratorIntegrations, after
	// any entries Values has.
	Profiles []Profile
	// Features sets <section>.enabled for each chart section named.
	Features map[string]bool
}

// FieldError is a problem with one chart value, named by its path
// (enforcement.scheduler.replicas, orchestratorIntegrations[0].name).
type FieldError struct {
	Path    string
	Message string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// ParseValues parses a YAML document of chart values. An empty document is
// an empty map; anything but a mapping is an error.
func ParseValues(doc string) (map[string]any, error) {
	out := map[string]any{}
	if strings.TrimSpace(doc) == "" {
		return out, nil
	}
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		return nil, fmt.Errorf("values is not valid YAML: %w", err)
	}
	if v == nil {
		return out, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("values must be a YAML mapping of chart values, not a %s", typeName(v))
	}
	return m, nil
}

// FeatureSections returns the top-level sections of a chart's default
// values that have a boolean enabled switch, sorted.
func FeatureSections(defaults map[string]any) []string {
	var out []string
	for k, v := range defaults {
		if m, ok := v.(map[string]any); ok {
			if _, ok := m["enabled"].(bool); ok {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Compose turns in into the values given to Helm. It fails when a feature
// is not a switch of the chart, or when Values sets a switch that Features
// also sets to something else.
func Compose(ch *chart.Chart, in Input) (map[string]any, error) {
	vals, err := ParseValues(in.Values)
	if err != nil {
		return nil, err
	}
	sections := FeatureSections(ch.Values)
	names := make([]string, 0, len(in.Features))
	for k := range in.Features {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		on := in.Features[name]
		if !contains(sections, name) {
			return nil, &FieldError{Path: "features." + name, Message: fmt.Sprintf("chart %s %s has no feature %q (its features: %s)", ch.Name(), ch.Metadata.Version, name, strings.Join(sections, ", "))}
		}
		sec, _ := vals[name].(map[string]any)
		if vals[name] != nil && sec == nil {
			return nil, &FieldError{Path: name, Message: fmt.Sprintf("must be a mapping, not a %s", typeName(vals[name]))}
		}
		if sec == nil {
			sec = map[string]any{}
			vals[name] = sec
		}
		if prev, ok := sec["enabled"]; ok && prev != on {
			return nil, &FieldError{Path: name + ".enabled", Message: fmt.Sprintf("values sets %v but features.%s is %v: set it in one place", prev, name, on)}
		}
		sec["enabled"] = on
	}
	if len(in.Profiles) > 0 {
		var list []any
		if cur, ok := vals[IntegrationsKey]; ok && cur != nil {
			l, ok := cur.([]any)
			if !ok {
				return nil, &FieldError{Path: IntegrationsKey, Message: fmt.Sprintf("must be a list, not a %s", typeName(cur))}
			}
			list = append(list, l...)
		}
		seen := map[string]bool{}
		for _, e := range list {
			if m, ok := e.(map[string]any); ok {
				if n, ok := m["name"].(string); ok {
					seen[n] = true
				}
			}
		}
		for _, p := range in.Profiles {
			n, _ := p.Entry["name"].(string)
			if seen[n] {
				return nil, &FieldError{Path: IntegrationsKey, Message: fmt.Sprintf("integration %q comes both from values and from orchestrator_profiles: keep one", n)}
			}
			seen[n] = true
			list = append(list, deepCopy(p.Entry))
		}
		vals[IntegrationsKey] = list
	}
	return vals, nil
}

// Decompose is the inverse of Compose for values read back from a release:
// it takes out the switches of features and the integrations that came
// from known profiles, and returns the rest as YAML.
func Decompose(defaults, vals map[string]any, profiles map[string]Profile) (rest string, features map[string]bool, names []string, err error) {
	vals = deepCopy(vals).(map[string]any)
	features = map[string]bool{}
	for _, name := range FeatureSections(defaults) {
		sec, ok := vals[name].(map[string]any)
		if !ok {
			continue
		}
		if on, ok := sec["enabled"].(bool); ok {
			features[name] = on
			delete(sec, "enabled")
			if len(sec) == 0 {
				delete(vals, name)
			}
		}
	}
	if l, ok := vals[IntegrationsKey].([]any); ok {
		var keep []any
		for _, e := range l {
			if pname, ok := matchProfile(e, profiles); ok {
				names = append(names, pname)
				continue
			}
			keep = append(keep, e)
		}
		if len(keep) == 0 {
			delete(vals, IntegrationsKey)
		} else {
			vals[IntegrationsKey] = keep
		}
	}
	if len(vals) > 0 {
		b, err := yaml.Marshal(vals)
		if err != nil {
			return "", nil, nil, err
		}
		rest = string(b)
	}
	return rest, features, names, nil
}

func matchProfile(entry any, profiles map[string]Profile) (string, bool) {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if Equal(entry, profiles[n].Entry) {
			return n, true
		}
	}
	return "", false
}

// Equal compares two values as JSON documents, so that numbers decoded
// differently (int64, float64) compare by value.
func Equal(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var na, nb any
	if json.Unmarshal(ja, &na) != nil || json.Unmarshal(jb, &nb) != nil {
		return false
	}
	return reflect.DeepEqual(na, nb)
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "mapping"
	case []any:
		return "list"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64, int64, int, json.Number:
		return "number"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// Digest is the SHA-256 of vals written as canonical JSON, so that equal
// values from YAML, from Helm's storage or from profiles digest alike.
func Digest(vals map[string]any) (string, error) {
	b, err := json.Marshal(vals)
	if err != nil {
		return "", fmt.Errorf("values cannot be written as JSON: %w", err)
	}
	var norm any
	if err := json.Unmarshal(b, &norm); err != nil {
		return "", err
	}
	if b, err = json.Marshal(norm); err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// ChartDigest is the SHA-256 of every file of the chart, by name.
func ChartDigest(ch *chart.Chart) string {
	files := append([]*chart.File(nil), ch.Raw...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Name, len(f.Data))
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
