package charts

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"helm.sh/helm/v3/pkg/chart/loader"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

// libraryVersion is the Kubernetes minor of the k8s.io/apiserver library
// this repository builds with.
var libraryVersion = version.MajorMinor(1, 35)

// celVersions are the Kubernetes minors whose CEL environments the chart's
// admission policies must compile in: the library's and the oldest minor
// the chart supports (Chart.yaml kubeVersion, ">=1.N.0-0").
var celVersions = func() []*version.Version {
	ch, err := loader.Load(chartDir)
	if err != nil {
		panic(err)
	}
	m := regexp.MustCompile(`^>=\s*v?1\.(\d+)\.`).FindStringSubmatch(ch.Metadata.KubeVersion)
	if m == nil {
		panic(fmt.Sprintf("Chart.yaml kubeVersion %q: want >=1.N.0-0", ch.Metadata.KubeVersion))
	}
	oldest, err := strconv.Atoi(m[1])
	if err != nil {
		panic(err)
	}
	return []*version.Version{libraryVersion, version.MajorMinor(1, uint(oldest))}
}()

// kindSchema is the OpenAPI schema of one kind the policies read, and the
// resource that serves it.
type kindSchema struct {
	gvk      schema.GroupVersionKind
	resource string
	schema   *spec.Schema
}

// policySchemas loads the real schemas the API server would type-check
// the chart's policies with: the KubeVirt CRDs generated from the pinned
// KubeVirt API module, the guard CRDs, and core Pod and ConfigMap from
// Kubernetes' own OpenAPI definitions (hack/tools/kubevirt-crds). A CRD's
// root metadata is the API server's ObjectMeta, as in its published
// OpenAPI.
func policySchemas(t *testing.T) []kindSchema {
	t.Helper()
	load := func(path string, into any) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(b)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := json.Unmarshal(j, into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var out []kindSchema
	for _, kind := range []string{"Pod", "ConfigMap"} {
		s := &spec.Schema{}
		load(filepath.Join("testdata", "schemas", "core.v1."+kind+".yaml"), s)
		out = append(out, kindSchema{corev1.SchemeGroupVersion.WithKind(kind), strings.ToLower(kind) + "s", s})
	}
	objectMeta := out[0].schema.Properties["metadata"]
	crds, err := filepath.Glob("../components/gpudevices/config/kubevirt-crds/*.yaml")
	if err != nil || len(crds) == 0 {
		t.Fatalf("no KubeVirt CRDs (%v): run hack/update-codegen.sh", err)
	}
	guard, _ := filepath.Glob("../components/api/config/crd/*guard.xila.us_*.yaml")
	for _, path := range append(crds, guard...) {
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind, Plural string
				} `json:"names"`
				Versions []struct {
					Name   string `json:"name"`
					Schema struct {
						OpenAPIV3Schema *spec.Schema `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		load(path, &crd)
		for _, v := range crd.Spec.Versions {
			s := v.Schema.OpenAPIV3Schema
			s.Properties["metadata"] = objectMeta
			out = append(out, kindSchema{
				schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind},
				crd.Spec.Names.Plural, s,
			})
		}
	}
	return out
}

// matched lists the schemas of the kinds a policy's resource rules match;
// rules with wildcard resources match no schema (the API server checks
// them untyped too).
func matched(p *admissionv1.ValidatingAdmissionPolicy, all []kindSchema) []kindSchema {
	var out []kindSchema
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		for _, k := range all {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					if g == k.gvk.Group && res == k.resource {
						out = append(out, k)
					}
				}
			}
		}
	}
	return out
}

func schemaOf(all []kindSchema, gvk schema.GroupVersionKind) *spec.Schema {
	for _, k := range all {
		if k.gvk == gvk {
			return k.schema
		}
	}
	return nil
}

// typedCompiler compiles as the API server's type checker does: object,
// oldObject and params typed from their schemas, in the environment of
// one compatibility version, for expressions written now.
type typedCompiler struct{ env *plugincel.CompositionEnv }

func (c *typedCompiler) CompileCELExpression(e plugincel.ExpressionAccessor, _ plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	env, err := c.env.Env(mode)
	if err != nil {
		return plugincel.CompilationResult{Error: &apiservercel.Error{Type: apiservercel.ErrorTypeInternal, Detail: err.Error()}, ExpressionAccessor: e}
	}
	ast, issues := env.Compile(e.GetExpression())
	if issues != nil && issues.Err() != nil {
		return plugincel.CompilationResult{Error: &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: issues.String()}, ExpressionAccessor: e}
	}
	return plugincel.CompilationResult{OutputType: ast.OutputType(), ExpressionAccessor: e}
}

func declType(s *spec.Schema, name string) *apiservercel.DeclType {
	if s == nil {
		return nil
	}
	return common.SchemaDeclType(&openapi.Schema{Schema: s}, true).MaybeAssignTypeName(name)
}

// typeCheck compiles every variable, validation and message expression of
// a policy against one object schema (nil: untyped) and returns the
// problems.
func typeCheck(t *testing.T, v *version.Version, p *admissionv1.ValidatingAdmissionPolicy, object, params *spec.Schema) []string {
	t.Helper()
	obj, par := declType(object, "Object"), declType(params, "Params")
	objType, parType := cel.DynType, cel.DynType
	decls := []*apiservercel.DeclType{plugincel.BuildNamespaceType(), plugincel.BuildRequestType()}
	if obj != nil {
		objType = obj.CelType()
		decls = append(decls, obj)
	}
	if par != nil {
		parType = par.CelType()
		decls = append(decls, par)
	}
	opts := []cel.EnvOption{
		cel.Variable(plugincel.NamespaceVarName, decls[0].CelType()),
		cel.Variable(plugincel.RequestVarName, decls[1].CelType()),
		cel.Variable(plugincel.ObjectVarName, objType),
		cel.Variable(plugincel.OldObjectVarName, objType),
		cel.Variable("authorizer", library.AuthorizerType),
	}
	if p.Spec.ParamKind != nil {
		opts = append(opts, cel.Variable(plugincel.ParamsVarName, parType))
	}
	envSet, err := environment.MustBaseEnvSet(v).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0), EnvOptions: opts, DeclTypes: decls,
	})
	if err != nil {
		t.Fatal(err)
	}
	comp, err := plugincel.NewCompositionEnv(plugincel.VariablesTypeName, envSet)
	if err != nil {
		t.Fatal(err)
	}
	cc := &plugincel.CompositedCompiler{Compiler: &typedCompiler{comp}, CompositionEnv: comp}
	optional := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	var problems []string
	for _, vr := range p.Spec.Variables {
		r := cc.CompileAndStoreVariable(&validating.Variable{Name: vr.Name, Expression: vr.Expression}, optional, environment.NewExpressions)
		if r.Error != nil {
			problems = append(problems, "variables."+vr.Name+": "+r.Error.Error())
		}
	}
	check := func(what, expr string, want *cel.Type) {
		r := cc.Compiler.CompileCELExpression(&validating.ValidationCondition{Expression: expr}, optional, environment.NewExpressions)
		switch {
		case r.Error != nil:
			problems = append(problems, what+": "+r.Error.Error())
		case !r.OutputType.IsExactType(want) && !r.OutputType.IsExactType(cel.DynType):
			problems = append(problems, what+": returns "+r.OutputType.String()+", want "+want.String())
		}
	}
	for i, val := range p.Spec.Validations {
		check("validations["+strconv.Itoa(i)+"].expression", val.Expression, cel.BoolType)
		if val.MessageExpression != "" {
			check("validations["+strconv.Itoa(i)+"].messageExpression", val.MessageExpression, cel.StringType)
		}
	}
	return problems
}

// renderedPolicy is one of the chart's ValidatingAdmissionPolicies, with
// the release's PolicyParameterSet as rendered with it.
type renderedPolicy struct {
	*admissionv1.ValidatingAdmissionPolicy
	// parameters is the rendered PolicyParameterSet object: the parameter
	// of every policy whose paramKind it is.
	parameters map[string]any
}

// renderedPolicies renders the chart with vals and returns its
// ValidatingAdmissionPolicies by name.
func renderedPolicies(t *testing.T, vals map[string]any) map[string]renderedPolicy {
	t.Helper()
	out := map[string]renderedPolicy{}
	var parameters map[string]any
	all := objects(t, mustRender(t, loadChart(t), vals).Manifest)
	for _, o := range all {
		if o.Kind == "PolicyParameterSet" {
			parameters = o.raw
		}
	}
	for _, o := range all {
		if o.Kind != "ValidatingAdmissionPolicy" {
			continue
		}
		b, err := json.Marshal(o.raw)
		if err != nil {
			t.Fatal(err)
		}
		p := &admissionv1.ValidatingAdmissionPolicy{}
		if err := json.Unmarshal(b, p); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		out[p.Name] = renderedPolicy{p, parameters}
	}
	return out
}

// compiledPolicy is a policy compiled the way the API server's admission
// plugin compiles it (untyped, stored-expression environment of one
// compatibility version), ready to evaluate requests.
type compiledPolicy struct {
	policy *admissionv1.ValidatingAdmissionPolicy
	// parameters is the parameter of a request that names none: the
	// release's PolicyParameterSet, for the policies that read them.
	parameters  map[string]any
	validator   validating.Validator
	validations plugincel.ConditionEvaluator
}

func compilePolicy(t *testing.T, v *version.Version, rp renderedPolicy) compiledPolicy {
	p := rp.ValidatingAdmissionPolicy
	var parameters map[string]any
	if pk := p.Spec.ParamKind; pk != nil && pk.Kind == "PolicyParameterSet" {
		if rp.parameters == nil {
			t.Fatalf("%s reads PolicyParameterSet, which the chart does not render", p.Name)
		}
		parameters = rp.parameters
	}
	t.Helper()
	comp, err := plugincel.NewCompositionEnv(plugincel.VariablesTypeName, environment.MustBaseEnvSet(v))
	if err != nil {
		t.Fatal(err)
	}
	fc := plugincel.NewCompositedCompilerFromTemplate(comp)
	hasParams := p.Spec.ParamKind != nil
	optional := plugincel.OptionalVariableDeclarations{HasParams: hasParams}
	var vars []plugincel.NamedExpressionAccessor
	for _, vr := range p.Spec.Variables {
		vars = append(vars, &validating.Variable{Name: vr.Name, Expression: vr.Expression})
	}
	fc.CompileAndStoreVariables(vars, optional, environment.StoredExpressions)
	var conds, msgs []plugincel.ExpressionAccessor
	for _, val := range p.Spec.Validations {
		reason := metav1.StatusReason("")
		if val.Reason != nil {
			reason = *val.Reason
		}
		conds = append(conds, &validating.ValidationCondition{Expression: val.Expression, Message: val.Message, Reason: &reason})
		msgs = append(msgs, &validating.MessageExpressionCondition{MessageExpression: val.MessageExpression})
	}
	validations := fc.CompileCondition(conds, optional, environment.StoredExpressions)
	return compiledPolicy{p, parameters, validating.NewValidator(
		validations, nil,
		fc.CompileCondition(nil, optional, environment.StoredExpressions),
		fc.CompileCondition(msgs, optional, environment.StoredExpressions),
		p.Spec.FailurePolicy), validations}
}

// request is one admission request to evaluate.
type request struct {
	op          admission.Operation
	gvr         schema.GroupVersionResource
	subresource string
	namespace   string
	object, old map[string]any
	params      map[string]any
	user        string
	groups      []string
}

// attributes builds the admission attributes of a request; its parameter
// is def unless it names its own.
func (r request) attributes(def map[string]any) (*admission.VersionedAttributes, runtime.Object) {
	toObj := func(m map[string]any) runtime.Object {
		if m == nil {
			return nil
		}
		return &unstructured.Unstructured{Object: runtime.DeepCopyJSON(m)}
	}
	obj, old := toObj(r.object), toObj(r.old)
	src := obj
	if src == nil {
		src = old
	}
	u := src.(*unstructured.Unstructured)
	gvk := u.GroupVersionKind()
	attr := admission.NewAttributesRecord(obj, old, gvk, r.namespace, u.GetName(), r.gvr, r.subresource, r.op, nil, false,
		&user.DefaultInfo{Name: r.user, Groups: r.groups})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk, VersionedObject: obj, VersionedOldObject: old}
	var params runtime.Object
	switch {
	case r.params != nil:
		params = toObj(r.params)
	case def != nil:
		params = toObj(def)
	}
	return va, params
}

// evaluate returns the policy's refusal messages, "" when it admits.
func (c compiledPolicy) evaluate(t *testing.T, r request) string {
	t.Helper()
	va, params := r.attributes(c.parameters)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.namespace}}
	res := c.validator.Validate(context.Background(), r.gvr, va, params, ns, celconfig.RuntimeCELCostBudget, nil)
	var msgs []string
	for _, d := range res.Decisions {
		if d.Action == validating.ActionDeny {
			msgs = append(msgs, d.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

// cost is the CEL cost the API server charges the policy's variables and
// validations for one request, in its cost units.
func (c compiledPolicy) cost(t testing.TB, r request) int64 {
	t.Helper()
	va, params := r.attributes(c.parameters)
	req := plugincel.CreateAdmissionRequest(va.Attributes, metav1.GroupVersionResource(r.gvr), metav1.GroupVersionKind(va.VersionedKind))
	ns := plugincel.CreateNamespaceObject(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.namespace}})
	_, remaining, err := c.validations.ForInput(context.Background(), va, req, plugincel.OptionalVariableBindings{VersionedParams: params}, ns, celconfig.RuntimeCELCostBudget)
	if err != nil {
		t.Fatalf("%s: %v", c.policy.Name, err)
	}
	return celconfig.RuntimeCELCostBudget - remaining
}
