package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// Validator applies the rules. It is safe for concurrent use.
type Validator struct {
	cfg Config
	log *slog.Logger
	// profiles are the parsed workload selectors of cfg.SchedulerProfiles.
	profiles map[string][]labels.Selector
	psa      *podSecurity
}

// New returns a Validator, or an error naming every problem with cfg.
func New(cfg Config) (*Validator, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid admission config: %w", err)
	}
	cfg.TrustedServiceAccounts = normalise(cfg.TrustedServiceAccounts)
	cfg.Binders = normalise(cfg.Binders)
	cfg.ReportBinders = normalise(cfg.ReportBinders)
	cfg.RecordBinders = normalise(cfg.RecordBinders)
	if len(cfg.DaemonSetControllers) == 0 {
		cfg.DaemonSetControllers = DefaultDaemonSetControllers
	}
	if cfg.Profile == "" {
		cfg.Profile = guard.ProfileProduction
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	profiles := map[string][]labels.Selector{}
	for name, sels := range cfg.SchedulerProfiles {
		for _, s := range sels {
			sel, _ := labels.Parse(s) // validated already
			profiles[name] = append(profiles[name], sel)
		}
	}
	psa, err := newPodSecurity()
	if err != nil {
		return nil, err
	}
	return &Validator{cfg: cfg, log: log, profiles: profiles, psa: psa}, nil
}

func normalise(accounts []string) []string {
	out := make([]string, 0, len(accounts))
	for _, a := range accounts {
		u, _ := ParseServiceAccount(a) // validated already
		out = append(out, u)
	}
	return out
}

// outcome is the decision about one request.
type outcome struct {
	violations []violation
	// subject names what was judged, for the message.
	subject string
	// patch, of an allowed outcome of a mutating endpoint, changes the
	// object.
	patch []jsonPatchOp
}

func (o outcome) allowed() bool { return len(o.violations) == 0 }

func deny(subject string, vs ...violation) outcome { return outcome{violations: vs, subject: subject} }

// Resource kinds a path judges.
var (
	podsResource  = "pods"
	nodesResource = "nodes"
)

// validatePod judges pods, pods/ephemeralcontainers and bindings.
func (v *Validator) validatePod(ctx context.Context, req *admissionv1.AdmissionRequest) outcome {
	if isBinding(req) {
		return v.validateBindingRequest(ctx, req)
	}
	if req.Resource.Group != "" || req.Resource.Resource != podsResource {
		return unexpected("request", "this endpoint judges pods, got resource %s", resourceString(req))
	}
	switch req.SubResource {
	case "", "ephemeralcontainers":
	case "status":
		return v.validatePodStatus(ctx, req)
	default:
		return unexpected("request", "subresource pods/%s is not judged here", req.SubResource)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return unexpected("request", "operation %s on pods; only CREATE and UPDATE are judged", req.Operation)
	}
	pod := &corev1.Pod{}
	if err := decode(req.Object.Raw, pod, "Pod"); err != nil {
		return unexpected("request", "%v", err)
	}
	var old *corev1.Pod
	if req.Operation == admissionv1.Update {
		old = &corev1.Pod{}
		if err := decode(req.OldObject.Raw, old, "Pod"); err != nil {
			return unexpected("request", "oldObject: %v", err)
		}
	}
	ns := req.Namespace
	subject := podSubject(ns, pod)
	id, err := v.cfg.Cluster.Identity(ctx, ns)
	if err != nil {
		return deny(subject, violation{RuleLookup, guard.ReasonLookupFailed, "metadata.namespace",
			fmt.Sprintf("cannot tell whether namespace %s belongs to a tenant: %v", ns, err)})
	}
	create := req.Operation == admissionv1.Create
	ownMirror := create && isOwnMirrorPod(req.UserInfo.Username, pod)
	if id.Protected {
		vs := v.protectedViolations(pod, id, create, ownMirror)
		switch {
		case old != nil && old.Spec.NodeName == "" && !samePlacement(old, pod):
			// A pod that waits to be scheduled and changes where it may
			// go (a gated pod's tolerations, selector or affinity) is
			// judged whole: what it had before was judged under what its
			// namespace was then, perhaps no tenant's.
			if id.Tenant == nil {
				vs = append(vs, tenantUnresolved(id))
			}
		case old != nil:
			vs = added(vs, v.protectedViolations(old, id, false, false))
		case id.Tenant == nil && len(vs) > 0:
			// Say why no pool is the pod's own.
			vs = append(vs, tenantUnresolved(id))
		}
		if len(vs) > 0 || !create {
			return deny(subject, vs...)
		}
		if out := v.checkTenant(ctx, subject, ns, pod, id); !out.allowed() || !ownMirror {
			return out
		}
		// A node's mirror pod runs on that node without any scheduler or
		// binding: judge it as the placement of the tenant there.
		node, known := v.cfg.Cluster.Node(pod.Spec.NodeName)
		if !known {
			return deny(subject, violation{RuleMirrorPod, guard.ReasonNodeUnknown, "spec.nodeName",
				fmt.Sprintf("mirror pod on node %q, which is not known", pod.Spec.NodeName)})
		}
		return v.judgeOnNode(ctx, subject, ns, pod.Name, pod, node, id, RuleMirrorPod)
	}
	if v.trustedPod(ns, pod, req.UserInfo.Username) {
		return outcome{}
	}
	vs := v.poolViolations(pod, ownMirror)
	if old != nil {
		vs = added(vs, v.poolViolations(old, false))
	}
	return deny(subject, vs...)
}

// checkTenant asks the evaluator for the node-independent verdict of a
// protected pod at CREATE: its tenant and policy must be resolved. Only an
// explicit allow admits; every failure to get one refuses.
func (v *Validator) checkTenant(ctx context.Context, subject, ns string, pod *corev1.Pod, id Identity) outcome {
	if id.Tenant == nil {
		return deny(subject, tenantUnresolved(id))
	}
	ev := v.cfg.Evaluator.Evaluate(&wire.EvaluateRequest{
		Profile: v.cfg.Profile,
		Pod:     wire.Pod{Namespace: ns, Name: pod.Name, UID: pod.UID},
		Tenant:  id.Tenant,
		Policy:  id.Policy,
		Nodes:   []wire.Node{},
	})
	if ev.Pod.Decision == guard.DecisionAllow {
		return outcome{}
	}
	rs := ev.Pod.Reasons
	if len(rs) == 0 {
		rs = []guard.Reason{guard.ReasonEvaluatorError}
	}
	vs := make([]violation, 0, len(rs))
	for i, r := range rs {
		detail := fmt.Sprintf("the evaluator decided %s", ev.Pod.Decision)
		if i == 0 && ev.Pod.Message != "" {
			detail += ": " + ev.Pod.Message
		}
		vs = append(vs, violation{RuleEvaluator, r, "", detail})
	}
	return deny(subject, vs...)
}

// tenantUnresolved is the refusal of a protected pod whose tenant no
// TenantBinding names.
func tenantUnresolved(id Identity) violation {
	detail := "the pod's tenant cannot be resolved"
	if id.Note != "" {
		detail += ": " + id.Note
	}
	return violation{RuleTenant, guard.ReasonTenantUnresolved, "metadata.namespace", detail}
}

// isBinding reports whether req binds a pod: the pods/binding subresource,
// or the older bindings resource that does the same.
func isBinding(req *admissionv1.AdmissionRequest) bool {
	return req.Resource.Group == "" && ((req.Resource.Resource == podsResource && req.SubResource == "binding") ||
		(req.Resource.Resource == "bindings" && req.SubResource == ""))
}

// validateBindingRequest judges requests to BindingsPath.
func (v *Validator) validateBindingRequest(ctx context.Context, req *admissionv1.AdmissionRequest) outcome {
	if !isBinding(req) {
		return unexpected("request", "this endpoint judges pods/binding and bindings, got resource %s", resourceString(req))
	}
	if req.Operation != admissionv1.Create {
		return unexpected("binding", "operation %s on %s; only CREATE is judged", req.Operation, resourceString(req))
	}
	return v.validateBinding(ctx, req)
}

// validateBinding judges a pods/binding CREATE. Only the accepted
// binders (the controlled scheduler's and each integration's) and trusted
// service accounts may bind a protected pod or bind any pod to a pool
// node, and whoever binds, such a binding is judged for that one node at
// bind time: a pod of no tenant stays off pool nodes unless it runs as a
// trusted service account, and a protected pod goes only where the
// evaluator allows it on that node's current evidence (pool and tenant,
// confinement, the full policy). Bindings by a report-only binder are
// allowed and logged when they would be refused.
func (v *Validator) validateBinding(ctx context.Context, req *admissionv1.AdmissionRequest) outcome {
	b := &corev1.Binding{}
	if err := decode(req.Object.Raw, b, "Binding"); err != nil {
		return unexpected("binding", "%v", err)
	}
	ns, name := req.Namespace, req.Name
	if name == "" {
		name = b.Name
	}
	target := b.Target.Name
	user := req.UserInfo.Username
	subject := fmt.Sprintf("binding of pod %s/%s to node %s by %s", ns, name, target, user)
	if vi, bad := v.recordViolation(b); bad {
		return deny(subject, vi)
	}
	id, err := v.cfg.Cluster.Identity(ctx, ns)
	if err != nil {
		return deny(subject, violation{RuleLookup, guard.ReasonLookupFailed, "metadata.namespace",
			fmt.Sprintf("cannot tell whether namespace %s belongs to a tenant: %v", ns, err)})
	}
	node, known := v.cfg.Cluster.Node(target)
	pool, inPool := "", false
	if known {
		pool, inPool = node.Labels[v.cfg.PoolLabel]
	}
	if !id.Protected && known && !inPool {
		return outcome{}
	}
	binder := slices.Contains(v.cfg.Binders, user)
	switch {
	case !binder && id.Protected:
		return deny(subject, violation{RuleBinding, guard.ReasonBindingNotAllowed, "",
			fmt.Sprintf("only %s may bind the pods of a protected namespace", v.binderList())})
	case !known:
		return deny(subject, violation{RuleBinding, guard.ReasonNodeUnknown, "target.name",
			fmt.Sprintf("node %q is not known, so it may be a pool node", target)})
	case !binder:
		return deny(subject, violation{RuleBinding, guard.ReasonBindingNotAllowed, "target.name",
			fmt.Sprintf("node %s is in pool %q; only %s may bind to pool nodes", target, pool, v.binderList())})
	}
	out := v.judgeBinding(ctx, subject, ns, name, node, pool, id)
	if !out.allowed() && slices.Contains(v.cfg.ReportBinders, user) {
		v.log.Warn("binding allowed by a report-only binder although it would be refused",
			"binder", user, "namespace", ns, "pod", name, "node", target, "reasons", reasonsOf(out.violations))
		v.cfg.Metrics.reportedBinding()
		return outcome{}
	}
	return out
}

// judgeBinding decides, for one node, a binding by an accepted binder.
func (v *Validator) judgeBinding(ctx context.Context, subject, ns, name string, node *corev1.Node, pool string, id Identity) outcome {
	if !id.Protected {
		pod, err := v.cfg.Cluster.Pod(ctx, ns, name)
		if err != nil {
			return deny(subject, violation{RuleLookup, guard.ReasonLookupFailed, "",
				fmt.Sprintf("cannot read pod %s/%s to tell whether it runs as a trusted service account: %v", ns, name, err)})
		}
		if v.trustedPod(ns, pod, "") {
			return outcome{}
		}
		return deny(subject, violation{RuleBinding, guard.ReasonBindingNotAllowed, "target.name",
			fmt.Sprintf("pod %s/%s belongs to no tenant and is not a DaemonSet pod of a trusted service account; node %s is in pool %q", ns, name, node.Name, pool)})
	}
	if id.Tenant == nil {
		return deny(subject, tenantUnresolved(id))
	}
	if !id.Labelled {
		// The namespace lacks the tenant label, so its pods were not sent
		// to the webhook at creation: judge the pod's own rules now.
		pod, err := v.cfg.Cluster.Pod(ctx, ns, name)
		if err != nil {
			return deny(subject, violation{RuleLookup, guard.ReasonLookupFailed, "",
				fmt.Sprintf("cannot read pod %s/%s, whose namespace lacks the %s label, to judge it: %v", ns, name, guard.LabelTenant, err)})
		}
		if vs := v.protectedViolations(pod, id, false, false); len(vs) > 0 {
			return deny(subject, vs...)
		}
	}
	if vs := v.claimsOnOtherNodes(ns, name, node); len(vs) > 0 {
		return deny(subject, vs...)
	}
	return v.judgeOnNode(ctx, subject, ns, name, nil, node, id, RuleBinding)
}

// judgeOnNode asks the evaluator whether a protected pod of a resolved
// tenant may run on one node, on the node's current evidence. Only an
// explicit allow admits.
//
// A pod that takes GPUs only through DRA claims is judged without the
// devices the evidence names for DRA (devices.ByClaim): the webhook judges
// each of those where it is allocated. pod is nil when the caller has not
// read it; it is read only when that could change the answer, a refusal on
// a node whose evidence names DRA devices, and a pod that cannot be read
// keeps the refusal.
func (v *Validator) judgeOnNode(ctx context.Context, subject, ns, name string, pod *corev1.Pod, node *corev1.Node, id Identity, rule string) outcome {
	candidate := wire.NodeOf(node, node.Labels[v.cfg.PoolLabel])
	if st, ok := v.cfg.Cluster.State(node.Name); ok {
		candidate.State = st
	}
	req := &wire.EvaluateRequest{
		Profile: v.cfg.Profile,
		Pod:     wire.Pod{Namespace: ns, Name: name},
		Tenant:  id.Tenant,
		Policy:  id.Policy,
		Nodes:   []wire.Node{candidate},
	}
	if pod != nil {
		req.DevicesByClaim = devices.ByClaim(pod)
	}
	res := v.cfg.Evaluator.Evaluate(req)
	v.cfg.Metrics.bindEvaluation()
	if len(res.Results) == 1 && res.Results[0].Decision != guard.DecisionAllow && pod == nil && namesDRADevices(candidate.State) {
		if p, err := v.cfg.Cluster.Pod(ctx, ns, name); err == nil && devices.ByClaim(p) {
			req.DevicesByClaim = true
			res = v.cfg.Evaluator.Evaluate(req)
			v.cfg.Metrics.bindEvaluation()
		}
	}
	if len(res.Results) != 1 {
		return deny(subject, violation{rule, guard.ReasonEvaluatorError, "",
			fmt.Sprintf("the evaluator gave %d results for one node (fail closed)", len(res.Results))})
	}
	r := res.Results[0]
	if r.Decision == guard.DecisionAllow {
		return outcome{}
	}
	rs := r.Reasons
	if len(rs) == 0 {
		rs = []guard.Reason{guard.ReasonEvaluatorError}
	}
	vs := make([]violation, 0, len(rs))
	for i, reason := range rs {
		detail := fmt.Sprintf("on node %s the evaluator decided %s", node.Name, r.Decision)
		if i == 0 && r.Message != "" {
			detail += ": " + r.Message
		}
		vs = append(vs, violation{rule, reason, "target.name", detail})
	}
	return deny(subject, vs...)
}

// namesDRADevices reports whether evidence names a device for DRA.
func namesDRADevices(s *v1alpha1.NodeSecurityStateSpec) bool {
	if s == nil {
		return false
	}
	for i := range s.Devices {
		if s.Devices[i].DRA != nil {
			return true
		}
	}
	return false
}

func reasonsOf(vs []violation) []string {
	out := make([]string, len(vs))
	for i, vi := range vs {
		out[i] = string(vi.reason)
	}
	return out
}

func (v *Validator) binderList() string {
	if len(v.cfg.Binders) == 0 {
		return "no one"
	}
	return strings.Join(v.cfg.Binders, ", ")
}

// validateNode judges a Node UPDATE: the pool label and the pool taints
// may not be changed or removed while tenant pods run on the node. Adding
// them is always allowed: it only closes the node further.
func (v *Validator) validateNode(ctx context.Context, req *admissionv1.AdmissionRequest) outcome {
	// nodes/status keeps the spec but takes changes to labels, so it is
	// judged like nodes.
	if req.Resource.Group != "" || req.Resource.Resource != nodesResource || (req.SubResource != "" && req.SubResource != "status") {
		return unexpected("request", "this endpoint judges nodes and nodes/status, got resource %s", resourceString(req))
	}
	if req.Operation != admissionv1.Update {
		return unexpected("request", "operation %s on nodes; only UPDATE is judged", req.Operation)
	}
	node, old := &corev1.Node{}, &corev1.Node{}
	if err := decode(req.Object.Raw, node, "Node"); err != nil {
		return unexpected("request", "%v", err)
	}
	if err := decode(req.OldObject.Raw, old, "Node"); err != nil {
		return unexpected("request", "oldObject: %v", err)
	}
	key := v.cfg.PoolLabel
	var changes []string
	if was, had := old.Labels[key]; had {
		if now, has := node.Labels[key]; !has {
			changes = append(changes, fmt.Sprintf("removes label %s=%s", key, was))
		} else if now != was {
			changes = append(changes, fmt.Sprintf("changes label %s from %q to %q", key, was, now))
		}
	}
	for _, t := range old.Spec.Taints {
		if t.Key == key && !slices.ContainsFunc(node.Spec.Taints, func(n corev1.Taint) bool {
			return n.Key == t.Key && n.Value == t.Value && n.Effect == t.Effect
		}) {
			changes = append(changes, fmt.Sprintf("removes or changes taint %s=%s:%s", t.Key, t.Value, t.Effect))
		}
	}
	if len(changes) == 0 {
		return outcome{}
	}
	subject := "update of node " + old.Name
	pods, err := v.cfg.Cluster.TenantPodsOn(ctx, old.Name)
	if err != nil {
		return deny(subject, violation{RuleLookup, guard.ReasonLookupFailed, "",
			fmt.Sprintf("cannot list the tenant pods on node %s: %v", old.Name, err)})
	}
	if len(pods) == 0 {
		return outcome{}
	}
	shown := pods
	if len(shown) > 5 {
		shown = shown[:5]
	}
	more := ""
	if len(pods) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(pods)-len(shown))
	}
	return deny(subject, violation{RuleNodePool, guard.ReasonPoolMembershipLocked, "metadata.labels",
		fmt.Sprintf("the update %s while %d tenant pod(s) run on the node (%s%s); drain them first",
			strings.Join(changes, ", "), len(pods), strings.Join(shown, ", "), more)})
}

// unexpected refuses a request the endpoint cannot judge.
func unexpected(subject, format string, args ...any) outcome {
	return deny(subject, violation{RuleRequest, guard.ReasonUnexpectedRequest, "", fmt.Sprintf(format, args...)})
}

// decode reads an embedded object; it must be present and of the kind.
func decode(raw []byte, into runtime.Object, kind string) error {
	if len(raw) == 0 {
		return fmt.Errorf("the request carries no %s object", kind)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("decoding the %s object: %w", kind, err)
	}
	if got := into.GetObjectKind().GroupVersionKind().Kind; got != "" && got != kind {
		return fmt.Errorf("the object is a %s, want %s", got, kind)
	}
	return nil
}

func podSubject(ns string, pod *corev1.Pod) string {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName + "*"
	}
	return fmt.Sprintf("pod %s/%s", ns, name)
}

func resourceString(req *admissionv1.AdmissionRequest) string {
	r := req.Resource.Resource
	if req.Resource.Group != "" {
		r += "." + req.Resource.Group
	}
	if req.SubResource != "" {
		r += "/" + req.SubResource
	}
	return r
}
