package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Offline is the input of an evaluation without a cluster, read from
// files: a policy (with, optionally, the tenant's binding), the evidence
// of one or more nodes (NodeSecurityStates, optionally with their Nodes)
// and optionally the pod.
type Offline struct {
	Policy  *v1alpha1.PlacementPolicy
	Binding *v1alpha1.TenantBinding
	States  []v1alpha1.NodeSecurityState
	Nodes   map[string]*corev1.Node
	Pod     *corev1.Pod
	// Tenant is the tenant when no binding is given.
	Tenant string
}

// InputError is input that cannot be evaluated: a file that cannot be
// read or parsed, or objects that do not fit together.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErrorf(format string, args ...any) error {
	return &InputError{fmt.Errorf(format, args...)}
}

// documents splits a YAML stream into its documents, skipping empty ones.
func documents(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &InputError{err}
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, inputErrorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 && !isComment(doc) {
			out = append(out, doc)
		}
	}
}

// isComment reports whether a document holds only comments.
func isComment(doc []byte) bool {
	var v any
	return yaml.Unmarshal(doc, &v) == nil && v == nil
}

// decode reads one document strictly into obj, whose kind it must be.
func decode(path string, i int, doc []byte, kind string, obj any) error {
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return inputErrorf("%s: document %d (%s): %w", path, i+1, kind, err)
	}
	return nil
}

// kindOf returns the apiVersion and kind of a document.
func kindOf(path string, i int, doc []byte) (string, string, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", "", inputErrorf("%s: document %d: %w", path, i+1, err)
	}
	return tm.APIVersion, tm.Kind, nil
}

// ReadOffline reads the files of `test`. policyPath holds a PlacementPolicy
// and at most one TenantBinding; evidencePath NodeSecurityStates and
// Nodes; podPath, when set, one Pod.
func ReadOffline(policyPath, evidencePath, podPath, tenant string) (*Offline, error) {
	o := &Offline{Nodes: map[string]*corev1.Node{}, Tenant: tenant}
	docs, err := documents(policyPath)
	if err != nil {
		return nil, err
	}
	group := v1alpha1.GroupVersion.String()
	for i, doc := range docs {
		av, kind, err := kindOf(policyPath, i, doc)
		if err != nil {
			return nil, err
		}
		switch {
		case av == group && kind == "PlacementPolicy" && o.Policy == nil:
			o.Policy = &v1alpha1.PlacementPolicy{}
			if err := decode(policyPath, i, doc, kind, o.Policy); err != nil {
				return nil, err
			}
		case av == group && kind == "TenantBinding" && o.Binding == nil:
			o.Binding = &v1alpha1.TenantBinding{}
			if err := decode(policyPath, i, doc, kind, o.Binding); err != nil {
				return nil, err
			}
		default:
			return nil, inputErrorf("%s: document %d is %s %s; want one %s PlacementPolicy and at most one TenantBinding", policyPath, i+1, av, kind, group)
		}
	}
	if o.Policy == nil {
		return nil, inputErrorf("%s holds no %s PlacementPolicy", policyPath, group)
	}
	if errs := v1alpha1.ValidatePlacementPolicySpec(&o.Policy.Spec, field.NewPath("spec")); len(errs) > 0 {
		return nil, inputErrorf("%s: PlacementPolicy %s is invalid: %w", policyPath, o.Policy.Name, errs.ToAggregate())
	}
	if o.Binding != nil && o.Binding.Spec.EffectivePolicyRef != nil && o.Binding.Spec.EffectivePolicyRef.Name != o.Policy.Name {
		return nil, inputErrorf("%s: TenantBinding %s names policy %s, not %s", policyPath, o.Binding.Name, o.Binding.Spec.EffectivePolicyRef.Name, o.Policy.Name)
	}
	if o.Binding == nil && o.Tenant == "" {
		return nil, inputErrorf("no tenant: put the tenant's TenantBinding in %s, or give --tenant", policyPath)
	}

	if docs, err = documents(evidencePath); err != nil {
		return nil, err
	}
	for i, doc := range docs {
		av, kind, err := kindOf(evidencePath, i, doc)
		if err != nil {
			return nil, err
		}
		switch {
		case av == group && kind == "NodeSecurityState":
			var s v1alpha1.NodeSecurityState
			if err := decode(evidencePath, i, doc, kind, &s); err != nil {
				return nil, err
			}
			o.States = append(o.States, s)
		case av == "v1" && kind == "Node":
			n := &corev1.Node{}
			if err := decode(evidencePath, i, doc, kind, n); err != nil {
				return nil, err
			}
			o.Nodes[n.Name] = n
		default:
			return nil, inputErrorf("%s: document %d is %s %s; want NodeSecurityStates and Nodes", evidencePath, i+1, av, kind)
		}
	}
	if len(o.States) == 0 {
		return nil, inputErrorf("%s holds no NodeSecurityState", evidencePath)
	}

	if podPath != "" {
		if docs, err = documents(podPath); err != nil {
			return nil, err
		}
		if len(docs) != 1 {
			return nil, inputErrorf("%s: want one Pod, found %d documents", podPath, len(docs))
		}
		if av, kind, err := kindOf(podPath, 0, docs[0]); err != nil {
			return nil, err
		} else if av != "v1" || kind != "Pod" {
			return nil, inputErrorf("%s is %s %s, want a v1 Pod", podPath, av, kind)
		}
		o.Pod = &corev1.Pod{}
		if err := decode(podPath, 0, docs[0], "Pod", o.Pod); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// fileLookup resolves a namespace against the files' binding and policy.
type fileLookup struct{ o *Offline }

func (l fileLookup) Listing(namespace string) ([]*v1alpha1.TenantBinding, error) {
	if l.o.Binding != nil && slices.Contains(l.o.Binding.Spec.Namespaces, namespace) {
		return []*v1alpha1.TenantBinding{l.o.Binding}, nil
	}
	return nil, nil
}

func (l fileLookup) PlacementPolicy(name string) (*v1alpha1.PlacementPolicy, error) {
	if name == l.o.Policy.Name {
		return l.o.Policy, nil
	}
	return nil, nil
}

// Request builds the evaluation request: the pod's tenant and policy as the
// cluster would resolve them from the binding (the policy given applies
// when the binding names none), or the tenant given; one candidate per
// NodeSecurityState, its pool from its Node or else its own pool label.
func (o *Offline) Request(profile guard.Profile) (*wire.EvaluateRequest, error) {
	req := &wire.EvaluateRequest{Profile: profile}
	if o.Pod != nil {
		req.Pod = wire.Pod{Namespace: o.Pod.Namespace, Name: o.Pod.Name, UID: o.Pod.UID}
	}
	switch {
	case o.Binding != nil:
		if req.Pod.Namespace == "" {
			if len(o.Binding.Spec.Namespaces) == 0 {
				return nil, inputErrorf("TenantBinding %s lists no namespace", o.Binding.Name)
			}
			req.Pod.Namespace = o.Binding.Spec.Namespaces[0]
		}
		b := o.Binding.DeepCopy()
		if b.Spec.EffectivePolicyRef == nil {
			b.Spec.EffectivePolicyRef = &v1alpha1.PolicyReference{Name: o.Policy.Name}
		}
		id, err := resolve.Namespace(&metav1.ObjectMeta{Name: req.Pod.Namespace, Labels: map[string]string{guard.LabelTenant: b.Spec.TenantID}},
			fileLookup{&Offline{Policy: o.Policy, Binding: b}})
		if err != nil {
			return nil, err
		}
		req.Tenant, req.Policy = wire.TenantOf(id.Tenant), wire.PolicyOf(id.Policy)
	default:
		req.Tenant, req.Policy = &wire.Tenant{ID: o.Tenant}, wire.PolicyOf(o.Policy)
	}
	for i := range o.States {
		s := &o.States[i]
		c := wire.Node{Name: s.Name, UID: s.Spec.NodeUID, Pool: s.Labels[guard.LabelTenantPool], State: &s.Spec}
		if n := o.Nodes[s.Name]; n != nil {
			gpus := guard.AllocatableGPUs(n.Status.Allocatable)
			c.UID, c.Pool, c.AllocatableGPUs = n.UID, n.Labels[guard.LabelTenantPool], &gpus
		}
		req.Nodes = append(req.Nodes, c)
	}
	return req, nil
}

// Test evaluates the files' request and returns one judgement per node.
func (o *Offline) Test(profile guard.Profile, clock evaluate.Clock) ([]NodeExplanation, error) {
	req, err := o.Request(profile)
	if err != nil {
		return nil, err
	}
	eval, err := evaluate.New(evaluate.Options{Profile: profile, Clock: clock})
	if err != nil {
		return nil, &InputError{err}
	}
	res := eval.Evaluate(req)
	pools := map[string]string{}
	for _, n := range req.Nodes {
		pools[n.Name] = n.Pool
	}
	out := make([]NodeExplanation, 0, len(res.Results))
	for _, nr := range res.Results {
		out = append(out, NodeExplanation{Node: nr.Node, Pool: pools[nr.Node], Decision: nr.Decision, Reasons: nr.Reasons,
			Fact: nr.Message, Fix: Fix(nr.Reasons, o.Policy.Name, pools[nr.Node])})
	}
	return out, nil
}
