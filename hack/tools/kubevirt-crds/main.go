// Command kubevirt-crds writes the CustomResourceDefinitions of the KubeVirt
// kinds that Xila Guard's GPU device policies and migration rules read,
// with structural schemas built from the OpenAPI definitions of the pinned
// KubeVirt API module (kubevirt.io/client-go/api), and the schemas of the
// core Pod and ConfigMap from Kubernetes' own definitions. Integration and end-to-end
// tests install the CRDs on an API server that runs no KubeVirt
// controller; the admission-policy tests type-check CEL against both.
//
// hack/update-codegen.sh runs it; `make verify` fails when the output is
// stale.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	k8sopenapi "k8s.io/kubernetes/pkg/generated/openapi"
	kubevirtopenapi "kubevirt.io/client-go/api"
	"sigs.k8s.io/yaml"
)

// crd is one KubeVirt kind and its served version.
type crd struct {
	group, version, kind, plural, singular string
	short                                  []string
	definition                             string
}

// The kinds the policies match: everything that can carry a GPU into a VM,
// and the migration. KubeVirt serves more versions; one is enough here.
var crds = []crd{
	{"kubevirt.io", "v1", "VirtualMachineInstance", "virtualmachineinstances", "virtualmachineinstance", []string{"vmi", "vmis"}, "kubevirt.io/api/core/v1.VirtualMachineInstance"},
	{"kubevirt.io", "v1", "VirtualMachine", "virtualmachines", "virtualmachine", []string{"vm", "vms"}, "kubevirt.io/api/core/v1.VirtualMachine"},
	{"kubevirt.io", "v1", "VirtualMachineInstanceReplicaSet", "virtualmachineinstancereplicasets", "virtualmachineinstancereplicaset", []string{"vmirs", "vmirss"}, "kubevirt.io/api/core/v1.VirtualMachineInstanceReplicaSet"},
	{"kubevirt.io", "v1", "VirtualMachineInstanceMigration", "virtualmachineinstancemigrations", "virtualmachineinstancemigration", []string{"vmim", "vmims"}, "kubevirt.io/api/core/v1.VirtualMachineInstanceMigration"},
	{"pool.kubevirt.io", "v1beta1", "VirtualMachinePool", "virtualmachinepools", "virtualmachinepool", []string{"vmpool", "vmpools"}, "kubevirt.io/api/pool/v1beta1.VirtualMachinePool"},
	{"instancetype.kubevirt.io", "v1beta1", "VirtualMachineInstancetype", "virtualmachineinstancetypes", "virtualmachineinstancetype", []string{"vminstancetype", "vminstancetypes", "vmf", "vmfs"}, "kubevirt.io/api/instancetype/v1beta1.VirtualMachineInstancetype"},
	{"instancetype.kubevirt.io", "v1beta1", "VirtualMachinePreference", "virtualmachinepreferences", "virtualmachinepreference", []string{"vmpref", "vmprefs", "vmp", "vmps"}, "kubevirt.io/api/instancetype/v1beta1.VirtualMachinePreference"},
}

func main() {
	crdDir := flag.String("crds", "", "directory to write the KubeVirt CRDs into (emptied first)")
	coreDir := flag.String("core-schemas", "", "directory to write the schemas of the core v1 kinds the policies read into")
	flag.Parse()
	if *crdDir == "" || *coreDir == "" {
		log.Fatal("usage: kubevirt-crds -crds DIR -core-schemas DIR")
	}
	ref := func(path string) spec.Ref { return spec.MustCreateRef("#/definitions/" + path) }
	defs := kubevirtopenapi.GetOpenAPIDefinitions(ref)
	for k, v := range k8sopenapi.GetOpenAPIDefinitions(ref) {
		if _, ok := defs[k]; !ok {
			defs[k] = v
		}
	}
	g := &generator{defs: defs}

	old, err := filepath.Glob(filepath.Join(*crdDir, "*.yaml"))
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.MkdirAll(*crdDir, 0o755); err != nil {
		log.Fatal(err)
	}
	for _, c := range crds {
		schema, err := g.root(c.definition, true)
		if err != nil {
			log.Fatalf("%s: %v", c.kind, err)
		}
		out := apiextensionsv1.CustomResourceDefinition{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: c.plural + "." + c.group},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: c.group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{
					Kind: c.kind, ListKind: c.kind + "List", Plural: c.plural, Singular: c.singular,
					ShortNames: c.short, Categories: []string{"all"},
				},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: c.version, Served: true, Storage: true,
					Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema},
					Subresources: subresources(c.kind),
				}},
			},
		}
		if err := write(filepath.Join(*crdDir, c.group+"_"+c.plural+".yaml"), &out); err != nil {
			log.Fatal(err)
		}
	}
	for _, kind := range []string{"Pod", "ConfigMap"} {
		s, err := g.root("k8s.io/api/core/v1."+kind, false)
		if err != nil {
			log.Fatalf("%s: %v", kind, err)
		}
		if err := write(filepath.Join(*coreDir, "core.v1."+kind+".yaml"), s); err != nil {
			log.Fatal(err)
		}
	}
}

func subresources(kind string) *apiextensionsv1.CustomResourceSubresources {
	if kind == "VirtualMachineInstancetype" || kind == "VirtualMachinePreference" {
		return nil
	}
	return &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
}

const header = "# Code generated by hack/tools/kubevirt-crds from kubevirt.io/client-go/api; DO NOT EDIT.\n"

func write(path string, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(header), b...), 0o644)
}

// generator turns OpenAPI definitions into structural schemas: every node
// typed, references inlined, recursion and free-form values preserved.
type generator struct {
	defs  map[string]common.OpenAPIDefinition
	stack []string
}

// root is the schema of a kind. A CRD's root metadata is the API server's
// own and is left as a bare object; elsewhere ObjectMeta is expanded.
func (g *generator) root(name string, crd bool) (*apiextensionsv1.JSONSchemaProps, error) {
	s, err := g.definition(name, true)
	if err != nil {
		return nil, err
	}
	if crd {
		s.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
	}
	return s, nil
}

// Well-known types whose JSON form is not their Go structure.
var special = map[string]apiextensionsv1.JSONSchemaProps{
	"k8s.io/apimachinery/pkg/api/resource.Quantity":                 intOrString(),
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString":               intOrString(),
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":                     {Type: "string", Format: "date-time"},
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime":                {Type: "string", Format: "date-time"},
	"k8s.io/apimachinery/pkg/apis/meta/v1.Duration":                 {Type: "string"},
	"k8s.io/apimachinery/pkg/runtime.RawExtension":                  {Type: "object", XPreserveUnknownFields: ptr(true)},
	"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":                 {Type: "object", XPreserveUnknownFields: ptr(true)},
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSON": {XPreserveUnknownFields: ptr(true)},
}

func intOrString() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		XIntOrString: true,
		AnyOf:        []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}},
	}
}

func ptr[T any](v T) *T { return &v }

func (g *generator) definition(name string, root bool) (*apiextensionsv1.JSONSchemaProps, error) {
	if s, ok := special[name]; ok && !root {
		return s.DeepCopy(), nil
	}
	for _, n := range g.stack {
		if n == name { // recursive type: keep what is written
			return &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}, nil
		}
	}
	d, ok := g.defs[name]
	if !ok {
		return nil, fmt.Errorf("no OpenAPI definition for %s", name)
	}
	g.stack = append(g.stack, name)
	defer func() { g.stack = g.stack[:len(g.stack)-1] }()
	return g.schema(&d.Schema)
}

func refName(r spec.Ref) string {
	return strings.TrimPrefix(r.String(), "#/definitions/")
}

func (g *generator) schema(s *spec.Schema) (*apiextensionsv1.JSONSchemaProps, error) {
	if r := refName(s.Ref); r != "" {
		return g.definition(r, false)
	}
	if len(s.AllOf) == 1 && refName(s.AllOf[0].Ref) != "" {
		return g.definition(refName(s.AllOf[0].Ref), false)
	}
	out := &apiextensionsv1.JSONSchemaProps{Format: s.Format}
	for _, e := range s.Enum {
		if str, ok := e.(string); ok {
			out.Enum = append(out.Enum, apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", str))})
		}
	}
	if len(s.Type) > 0 {
		out.Type = s.Type[0]
	}
	switch {
	case out.Type == "array" || (out.Type == "" && s.Items != nil):
		out.Type = "array"
		if s.Items == nil || s.Items.Schema == nil {
			out.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}}
			break
		}
		it, err := g.schema(s.Items.Schema)
		if err != nil {
			return nil, err
		}
		out.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: it}
	case out.Type == "object" || (out.Type == "" && (len(s.Properties) > 0 || s.AdditionalProperties != nil)):
		out.Type = "object"
		if len(s.Properties) > 0 {
			out.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
			names := make([]string, 0, len(s.Properties))
			for n := range s.Properties {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				p := s.Properties[n]
				ps, err := g.schema(&p)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", n, err)
				}
				out.Properties[n] = *ps
			}
			out.Required = append([]string(nil), s.Required...)
		}
		if ap := s.AdditionalProperties; ap != nil {
			if ap.Schema != nil {
				as, err := g.schema(ap.Schema)
				if err != nil {
					return nil, err
				}
				out.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: as}
			} else if ap.Allows {
				out.XPreserveUnknownFields = ptr(true)
			}
		}
		if len(s.Properties) == 0 && s.AdditionalProperties == nil {
			out.XPreserveUnknownFields = ptr(true)
		}
	case out.Type == "":
		out.XPreserveUnknownFields = ptr(true)
	}
	return out, nil
}
