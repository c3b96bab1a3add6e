package platform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// KubeVersion is the Kubernetes version charts are rendered against when
// no cluster is asked (plan time).
var KubeVersion = "v1.35.4"

// CheckSchema validates vals, merged over the chart's defaults, against the
// chart's values.schema.json and returns one FieldError per violation,
// sorted by path. A chart without a schema accepts anything.
func CheckSchema(ch *chart.Chart, vals map[string]any) ([]*FieldError, error) {
	if len(ch.Schema) == 0 {
		return nil, nil
	}
	merged, err := chartutil.CoalesceValues(ch, deepCopy(vals).(map[string]any))
	if err != nil {
		return nil, fmt.Errorf("merging values with the chart's defaults: %w", err)
	}
	doc, err := jsonRoundTrip(merged.AsMap())
	if err != nil {
		return nil, err
	}
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ch.Schema))
	if err != nil {
		return nil, fmt.Errorf("chart %s: values.schema.json: %w", ch.Name(), err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("file:///values.schema.json", schemaDoc); err != nil {
		return nil, fmt.Errorf("chart %s: values.schema.json: %w", ch.Name(), err)
	}
	sch, err := c.Compile("file:///values.schema.json")
	if err != nil {
		return nil, fmt.Errorf("chart %s: values.schema.json: %w", ch.Name(), err)
	}
	err = sch.Validate(doc)
	if err == nil {
		return nil, nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return nil, err
	}
	p := message.NewPrinter(language.English)
	var out []*FieldError
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if _, ok := e.ErrorKind.(*kind.Schema); ok {
			return
		}
		fe := &FieldError{Path: dotted(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(p)}
		if fe.Path == "" {
			fe.Path = "(top level)"
		}
		if key := fe.Error(); !seen[key] {
			seen[key] = true
			out = append(out, fe)
		}
	}
	walk(verr)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Render renders the chart with vals as `helm template` would, without a
// cluster, and returns the manifest. Template errors (a chart's own `fail`
// messages among them) come back as they are.
func Render(ch *chart.Chart, release, namespace string, vals map[string]any) (string, error) {
	inst := action.NewInstall(&action.Configuration{})
	inst.ClientOnly = true
	inst.DryRun = true
	inst.Replace = true
	inst.ReleaseName = release
	inst.Namespace = namespace
	inst.IncludeCRDs = true
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return "", err
	}
	inst.KubeVersion = kv
	rel, err := inst.Run(ch, deepCopy(vals).(map[string]any))
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// dotted writes a JSON pointer's tokens as a values path:
// enforcement.core.replicas, orchestratorIntegrations[1].name.
func dotted(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		if _, err := strconv.Atoi(t); err == nil {
			b.WriteString("[" + t + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	return b.String()
}

func jsonRoundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("values cannot be written as JSON: %w", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}
