package plugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/policyreport/v1alpha2"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// PodWebhook is the name of the pod webhook in its configuration, whatever
// the configuration is called.
const PodWebhook = "pods.webhook.guard.xila.us"

// partOf selects the platform's own objects.
var partOf = client.MatchingLabels{"app.kubernetes.io/part-of": "xila-guard"}

// Health is the state of an installation, as `status` prints it.
type Health struct {
	Namespace  string
	Components []Component
	Webhooks   []Webhook
	// Probe is what a server-side dry-run pod creation in a tenant's
	// namespace showed of the pod webhook.
	Probe     string
	ProbeOK   bool
	Evaluator string
	// EvaluatorOK is false when a xila-guard-core runs and does not answer.
	EvaluatorOK bool
	Pools       []PoolEvidence
	Violations  Violations
}

// Component is one Deployment or DaemonSet of the platform.
type Component struct {
	Kind, Name     string
	Ready, Desired int32
	Versions       []string
}

// OK reports whether every wanted replica is ready.
func (c Component) OK() bool { return c.Desired > 0 && c.Ready >= c.Desired }

// Webhook is one webhook of the platform's configurations.
type Webhook struct {
	Configuration, Name string
	FailurePolicy       string
	Service             string
	// Endpoints counts the service's ready endpoints.
	Endpoints int
}

// PoolEvidence is the freshness of one pool's evidence.
type PoolEvidence struct {
	Pool string
	// States counts the pool's NodeSecurityStates; Ready those whose Ready
	// condition is True, Stale those that are not Ready for their age.
	// Unjudged counts those with no status (no observe controller keeps
	// it), which count as Ready or Stale by their age against the default
	// maximum age.
	States, Ready, Stale, Unjudged int
	// Oldest is the age of the oldest evidence.
	Oldest time.Duration
}

// Violations are the recent findings of the observe controller.
type Violations struct {
	// Since is the window Events were counted in.
	Since time.Duration
	// Events counts GuardPolicyViolation events in the window; Latest
	// holds the newest few, "namespace/pod: note".
	Events int
	Latest []string
	// ReportFail and ReportError sum the PolicyReports' results; Reports
	// is false when the cluster serves no PolicyReport.
	Reports                 bool
	ReportFail, ReportError int
	// ReportsError says why the PolicyReports could not be read.
	ReportsError string
}

// OK reports whether the installation is healthy: every component ready,
// every fail-closed webhook with an endpoint, the webhook and the
// evaluator answering, every pool's evidence fresh.
func (h *Health) OK() bool {
	for _, c := range h.Components {
		if !c.OK() {
			return false
		}
	}
	for _, w := range h.Webhooks {
		if w.FailurePolicy == string(admissionregistrationv1.Fail) && w.Endpoints == 0 {
			return false
		}
	}
	for _, p := range h.Pools {
		if p.Ready < p.States {
			return false
		}
	}
	return len(h.Components) > 0 && h.ProbeOK && h.EvaluatorOK
}

// maxLatest is how many violations `status` shows.
const maxLatest = 5

// Status reads the installation in namespace.
func Status(ctx context.Context, c client.Client, cs kubernetes.Interface, namespace string, window time.Duration, now time.Time) (*Health, error) {
	h := &Health{Namespace: namespace}
	if err := h.components(ctx, c, namespace); err != nil {
		return nil, err
	}
	if err := h.webhooks(ctx, c); err != nil {
		return nil, err
	}
	h.probe(ctx, c)
	h.evaluator(ctx, c, cs, namespace)
	if err := h.evidence(ctx, c, now); err != nil {
		return nil, err
	}
	if err := h.violations(ctx, c, window, now); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Health) components(ctx context.Context, c client.Client, ns string) error {
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(ns), partOf); err != nil {
		return fmt.Errorf("listing the Deployments of %s: %w", ns, err)
	}
	for _, d := range deps.Items {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		h.Components = append(h.Components, Component{Kind: "Deployment", Name: d.Name, Ready: d.Status.ReadyReplicas, Desired: want,
			Versions: versions(d.Spec.Template.Spec.Containers)})
	}
	var dss appsv1.DaemonSetList
	if err := c.List(ctx, &dss, client.InNamespace(ns), partOf); err != nil {
		return fmt.Errorf("listing the DaemonSets of %s: %w", ns, err)
	}
	for _, d := range dss.Items {
		h.Components = append(h.Components, Component{Kind: "DaemonSet", Name: d.Name, Ready: d.Status.NumberReady,
			Desired: d.Status.DesiredNumberScheduled, Versions: versions(d.Spec.Template.Spec.Containers)})
	}
	slices.SortFunc(h.Components, func(a, b Component) int { return cmp.Compare(a.Name, b.Name) })
	return nil
}

// versions are the image tags of the containers.
func versions(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		v := c.Image
		if i := strings.LastIndex(v, "@"); i >= 0 {
			v = v[i+1:]
		} else if i := strings.LastIndex(v, ":"); i >= 0 && !strings.Contains(v[i:], "/") {
			v = v[i+1:]
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func (h *Health) webhooks(ctx context.Context, c client.Client) error {
	var vs admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &vs, partOf); err != nil {
		return fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	var ms admissionregistrationv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &ms, partOf); err != nil {
		return fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	add := func(conf, name string, fp *admissionregistrationv1.FailurePolicyType, svc *admissionregistrationv1.ServiceReference) {
		w := Webhook{Configuration: conf, Name: name, FailurePolicy: string(admissionregistrationv1.Fail)}
		if fp != nil {
			w.FailurePolicy = string(*fp)
		}
		if svc != nil {
			w.Service = svc.Namespace + "/" + svc.Name
			w.Endpoints = readyEndpoints(ctx, c, svc.Namespace, svc.Name)
		}
		h.Webhooks = append(h.Webhooks, w)
	}
	for _, v := range vs.Items {
		for _, w := range v.Webhooks {
			add(v.Name, w.Name, w.FailurePolicy, w.ClientConfig.Service)
		}
	}
	for _, m := range ms.Items {
		for _, w := range m.Webhooks {
			add(m.Name, w.Name, w.FailurePolicy, w.ClientConfig.Service)
		}
	}
	return nil
}

// readyEndpoints counts a service's ready endpoints; 0 when they cannot be
// read.
func readyEndpoints(ctx context.Context, c client.Client, ns, name string) int {
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return 0
	}
	n := 0
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

// probe creates a pod in a tenant's namespace with a server-side dry run:
// the API server calls the pod webhook as for a real pod and stores
// nothing. An answer, allow or deny, shows the webhook answers.
func (h *Health) probe(ctx context.Context, c client.Client) {
	if !slices.ContainsFunc(h.Webhooks, func(w Webhook) bool { return w.Name == PodWebhook }) {
		h.Probe, h.ProbeOK = "no pod webhook installed (webhook.enabled=false)", true
		return
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss, client.HasLabels{guard.LabelTenant}); err != nil || len(nss.Items) == 0 {
		h.Probe, h.ProbeOK = "no tenant namespace to probe the pod webhook in", true
		return
	}
	ns := nss.Items[0].Name
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "xila-guard-status-probe-"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "xila-guard/status-probe"}}}}
	start := time.Now()
	err := c.Create(ctx, pod, client.DryRunAll)
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case err == nil:
		h.Probe, h.ProbeOK = fmt.Sprintf("a dry-run pod in %s was admitted in %s", ns, took), true
	case strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), "webhook.guard.xila.us"):
		h.Probe, h.ProbeOK = fmt.Sprintf("the pod webhook answered in %s (a dry-run pod in %s, refused as it should be: %s)", took, ns, firstLine(err.Error())), true
	case strings.Contains(err.Error(), "failed calling webhook"):
		h.Probe = fmt.Sprintf("the pod webhook does not answer; pod creation in tenant namespaces fails: %s", firstLine(err.Error()))
	case apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "admission"):
		h.Probe, h.ProbeOK = "not allowed to create a dry-run pod in "+ns+"; webhook not probed", true
	default:
		h.Probe = fmt.Sprintf("a dry-run pod in %s: %s", ns, firstLine(err.Error()))
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:297] + "..."
	}
	return s
}

// evaluator asks a xila-guard-core, when one runs, whether it is ready,
// through the API server's service proxy. The chart labels its Service
// app.kubernetes.io/component=evaluator, whatever the release's names.
func (h *Health) evaluator(ctx context.Context, c client.Client, cs kubernetes.Interface, ns string) {
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs, client.InNamespace(ns), partOf, client.MatchingLabels{"app.kubernetes.io/component": "evaluator"}); err != nil || len(svcs.Items) == 0 {
		h.Evaluator, h.EvaluatorOK = "in-process (the scheduler, webhook and observe controller link the evaluator library)", true
		return
	}
	svc := &svcs.Items[0]
	if cs == nil || len(svc.Spec.Ports) == 0 {
		h.Evaluator = svc.Name + " has no port"
		return
	}
	port := svc.Spec.Ports[0].Name
	if port == "" {
		port = fmt.Sprint(svc.Spec.Ports[0].Port)
	}
	start := time.Now()
	body, err := cs.CoreV1().Services(ns).ProxyGet("http", svc.Name, port, "/readyz", nil).DoRaw(ctx)
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		h.Evaluator = fmt.Sprintf("%s /readyz: %s", svc.Name, firstLine(err.Error()))
		return
	}
	h.Evaluator, h.EvaluatorOK = fmt.Sprintf("%s ready (%s in %s)", svc.Name, strings.TrimSpace(string(body)), took), true
}

func (h *Health) evidence(ctx context.Context, c client.Client, now time.Time) error {
	var states v1alpha1.NodeSecurityStateList
	if err := c.List(ctx, &states); err != nil {
		return fmt.Errorf("listing NodeSecurityStates: %w", err)
	}
	pools := map[string]*PoolEvidence{}
	for _, s := range states.Items {
		name := s.Labels[guard.LabelTenantPool]
		if name == "" {
			name = "(none)"
		}
		p := pools[name]
		if p == nil {
			p = &PoolEvidence{Pool: name}
			pools[name] = p
		}
		p.States++
		age := now.Sub(s.Spec.ObservedAt.Time)
		switch cond := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); {
		case cond == nil:
			// No status: the observe controller, which keeps it, is off.
			// Judge the age against the default maximum.
			p.Unjudged++
			if age > v1alpha1.DefaultMaxEvidenceAge {
				p.Stale++
			} else {
				p.Ready++
			}
		case cond.Status == metav1.ConditionTrue:
			p.Ready++
		case cond.Reason == "EvidenceStale":
			p.Stale++
		}
		if age > p.Oldest {
			p.Oldest = age
		}
	}
	for _, p := range pools {
		h.Pools = append(h.Pools, *p)
	}
	slices.SortFunc(h.Pools, func(a, b PoolEvidence) int { return cmp.Compare(a.Pool, b.Pool) })
	return nil
}

func (h *Health) violations(ctx context.Context, c client.Client, window time.Duration, now time.Time) error {
	h.Violations.Since = window
	var evs eventsv1.EventList
	if err := c.List(ctx, &evs); err != nil {
		return fmt.Errorf("listing Events: %w", err)
	}
	type v struct {
		at   time.Time
		text string
	}
	var found []v
	for _, e := range evs.Items {
		if e.Reason != guard.EventReasonPolicyViolation {
			continue
		}
		at := lastSeen(&e)
		if now.Sub(at) > window {
			continue
		}
		found = append(found, v{at, e.Regarding.Namespace + "/" + e.Regarding.Name + ": " + firstLine(e.Note)})
	}
	slices.SortFunc(found, func(a, b v) int { return b.at.Compare(a.at) })
	h.Violations.Events = len(found)
	for _, f := range found[:min(len(found), maxLatest)] {
		h.Violations.Latest = append(h.Violations.Latest, f.text)
	}
	var reports v1alpha2.PolicyReportList
	err := c.List(ctx, &reports, client.MatchingLabels{guard.LabelManagedBy: guard.ReportsManagedBy})
	if meta.IsNoMatchError(err) {
		return nil
	} else if err != nil {
		// The reports are one view among others: say why they are
		// missing, and show the rest.
		h.Violations.ReportsError = firstLine(err.Error())
		return nil
	}
	h.Violations.Reports = true
	for _, r := range reports.Items {
		h.Violations.ReportFail += r.Summary.Fail
		h.Violations.ReportError += r.Summary.Error
	}
	return nil
}
