package status

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/resolve"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Reasons of the Ready conditions.
const (
	// ReasonReferenced: the policy is valid and a binding's namespaces
	// resolve to it.
	ReasonReferenced = "Referenced"
	// ReasonInvalid: the policy's spec breaks the API's rules.
	ReasonInvalid = "Invalid"
	// ReasonUnreferenced: no binding's namespace resolves to the policy.
	ReasonUnreferenced = "Unreferenced"

	// ReasonResolved: every namespace of the binding exists and resolves
	// to the binding's tenant and a valid policy.
	ReasonResolved = "Resolved"
	// ReasonTenantUnresolved: a namespace of the binding does not resolve
	// to the binding's tenant.
	ReasonTenantUnresolved = "TenantUnresolved"
	// ReasonPolicyNotFound: a namespace of the binding names no policy, or
	// one that does not exist.
	ReasonPolicyNotFound = "PolicyNotFound"
	// ReasonPolicyInvalid: the binding's policy breaks the API's rules.
	ReasonPolicyInvalid = "PolicyInvalid"
	// ReasonNamespacesMissing: a namespace of the binding does not exist.
	ReasonNamespacesMissing = "NamespacesMissing"

	// ReasonEvidenceCurrent: the evidence is complete, fresh and about the
	// node of that name.
	ReasonEvidenceCurrent = "EvidenceCurrent"
	// ReasonEvidenceStale: the evidence is older than its maximum age.
	ReasonEvidenceStale = "EvidenceStale"
	// ReasonEvidenceIncomplete: the publisher could not determine every
	// fact.
	ReasonEvidenceIncomplete = "EvidenceIncomplete"
	// ReasonNodeNotFound: no node has the state's name.
	ReasonNodeNotFound = "NodeNotFound"
	// ReasonNodeMismatch: the evidence names another node UID.
	ReasonNodeMismatch = "NodeMismatch"
)

// maxNamesInMessage bounds the names a condition message lists.
const maxNamesInMessage = 5

// policyReady is the Ready condition of a policy that the named bindings
// reference.
func policyReady(p *v1alpha1.PlacementPolicy, bindings []string) metav1.Condition {
	if errs := v1alpha1.ValidatePlacementPolicySpec(&p.Spec, field.NewPath("spec")); len(errs) > 0 {
		return notReady(ReasonInvalid, "fix the spec: "+errs.ToAggregate().Error())
	}
	if len(bindings) == 0 {
		return notReady(ReasonUnreferenced, "no TenantBinding's namespaces resolve to the policy; name it in a TenantBinding's effectivePolicyRef (or in the "+
			guard.AnnotationPolicy+" annotation of a namespace whose binding names none)")
	}
	return ready(ReasonReferenced, "in effect for TenantBindings "+names(bindings))
}

// namespaceState is one namespace of a binding: whether it exists and
// what it resolves to.
type namespaceState struct {
	name   string
	exists bool
	id     resolve.Identity
}

// bindingReady is the Ready condition of a binding whose namespaces
// resolved as given.
func bindingReady(b *v1alpha1.TenantBinding, nss []namespaceState) metav1.Condition {
	var unresolved, noPolicy, missing []string
	var notes []string
	invalid := map[string]field.ErrorList{}
	for _, ns := range nss {
		switch {
		case ns.id.Tenant == nil || ns.id.Tenant.ID != b.Spec.TenantID:
			unresolved = append(unresolved, ns.name)
			notes = appendNote(notes, ns.id.Note)
		case ns.id.Policy == nil:
			noPolicy = append(noPolicy, ns.name)
			notes = appendNote(notes, ns.id.Note)
		default:
			p := ns.id.Policy
			if _, seen := invalid[p.Name]; !seen {
				if errs := v1alpha1.ValidatePlacementPolicySpec(&p.Spec, field.NewPath("spec")); len(errs) > 0 {
					invalid[p.Name] = errs
				}
			}
		}
		if !ns.exists {
			missing = append(missing, ns.name)
		}
	}
	switch {
	case len(unresolved) > 0:
		return notReady(ReasonTenantUnresolved, fmt.Sprintf("namespaces %s do not resolve to tenant %s%s; list each namespace in one TenantBinding only, and label it with this tenant or not at all",
			names(unresolved), b.Spec.TenantID, because(notes)))
	case len(noPolicy) > 0:
		return notReady(ReasonPolicyNotFound, fmt.Sprintf("namespaces %s have no PlacementPolicy%s; create the policy, or name an existing one in effectivePolicyRef",
			names(noPolicy), because(notes)))
	case len(invalid) > 0:
		var msgs []string
		for _, name := range sortedKeys(invalid) {
			msgs = append(msgs, "PlacementPolicy "+name+": "+invalid[name].ToAggregate().Error())
		}
		return notReady(ReasonPolicyInvalid, "fix the policy: "+strings.Join(msgs, "; "))
	case len(missing) > 0:
		return notReady(ReasonNamespacesMissing, fmt.Sprintf("namespaces %s do not exist; create them labelled %s=%s, or remove them from spec.namespaces",
			names(missing), guard.LabelTenant, b.Spec.TenantID))
	}
	return ready(ReasonResolved, fmt.Sprintf("%d namespaces resolve to tenant %s and their policy", len(nss), b.Spec.TenantID))
}

// stateReady is the Ready condition of a state: nodeUID is the UID of the
// node of its name, empty when there is none; maxAge the evidence age the
// node's policy accepts.
func stateReady(spec *v1alpha1.NodeSecurityStateSpec, name string, nodeUID types.UID, maxAge time.Duration, now time.Time) metav1.Condition {
	switch {
	case nodeUID == "":
		return notReady(ReasonNodeNotFound, "no node is named "+name+"; the evidence describes no node and is not used")
	case spec.NodeUID != nodeUID:
		return notReady(ReasonNodeMismatch, fmt.Sprintf("the evidence names node UID %s but node %s has UID %s; the publisher replaces it once it sees the new node", spec.NodeUID, name, nodeUID))
	case !spec.Complete:
		return notReady(ReasonEvidenceIncomplete, "the publisher could not determine every fact; check the node's feature labels or its attester")
	case now.Sub(spec.ObservedAt.Time) > maxAge:
		return notReady(ReasonEvidenceStale, fmt.Sprintf("the evidence was last confirmed at %s, longer ago than its maximum age of %s; check the node's evidence publisher (GPU feature discovery, or the attestation controller)",
			spec.ObservedAt.UTC().Format(time.RFC3339), maxAge))
	}
	return ready(ReasonEvidenceCurrent, fmt.Sprintf("the evidence is complete and no older than %s", maxAge))
}

func ready(reason, message string) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, Message: message}
}

func notReady(reason, message string) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message}
}

// setReady puts c into conds for generation gen; the transition time is
// now when the status changes, kept otherwise.
func setReady(conds *[]metav1.Condition, c metav1.Condition, gen int64, now time.Time) {
	c.ObservedGeneration = gen
	c.LastTransitionTime = metav1.NewTime(now)
	if len(c.Message) > maxMessage {
		c.Message = c.Message[:maxMessage-3] + "..."
	}
	meta.SetStatusCondition(conds, c)
}

// maxMessage is the longest message a metav1.Condition may carry.
const maxMessage = 32768

// names lists a few names, and how many more there are.
func names(ns []string) string {
	if len(ns) <= maxNamesInMessage {
		return strings.Join(ns, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ns[:maxNamesInMessage], ", "), len(ns)-maxNamesInMessage)
}

// because joins the notes that explain a problem, if any.
func because(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return ": " + strings.Join(notes, "; ")
}

func appendNote(notes []string, note string) []string {
	if note == "" || slices.Contains(notes, note) || len(notes) >= maxNamesInMessage {
		return notes
	}
	return append(notes, note)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
