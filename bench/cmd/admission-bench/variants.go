package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xila-guard/xila-guard/bench/internal/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
)

// The variants.
const (
	variantNone    = "none"
	variantCEL     = "cel"
	variantWebhook = "webhook"
	// variantWebhookECDSA is the webhook with an ECDSA serving key in
	// place of the RSA key the chart generates: the same binary, in a
	// process of its own.
	variantWebhookECDSA = "webhook-ecdsa"
)

var variantNames = []string{variantNone, variantCEL, variantWebhook, variantWebhookECDSA}

var variantDescriptions = map[string]string{
	variantNone:         "no admission",
	variantCEL:          "ValidatingAdmissionPolicy (CEL)",
	variantWebhook:      "xila-guard webhook",
	variantWebhookECDSA: "xila-guard webhook, ECDSA key",
}

// servingKeys is the serving key of each webhook variant: RSA 2048 as the
// chart's generated certificate (Helm's genSignedCert) and cert-manager's
// default have, or ECDSA P-256.
var servingKeys = map[string]string{variantWebhook: "rsa", variantWebhookECDSA: "ecdsa"}

// hookNames are the webhooks' names in the configuration: the chart's, and
// another for the ECDSA variant so that its refusals tell it apart.
var hookNames = map[string]string{variantWebhook: "pods.webhook.guard.xila.us", variantWebhookECDSA: "pods-ecdsa.webhook.guard.xila.us"}

// Names of the admission objects the variants create.
const (
	webhookConfigName = "xila-guard-pods"
	policyName        = "xila-guard-bench-protected-pods"
)

// tenantSelector selects the namespaces the chart's pods webhook sees: a
// tenant's, never the release's own or the system ones.
func tenantSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn,
			Values: []string{"xila-guard-system", "kube-system", "kube-public", "kube-node-lease"}},
		{Key: guard.LabelTenant, Operator: metav1.LabelSelectorOpExists},
	}}
}

var podRules = []admissionregistrationv1.RuleWithOperations{{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
	Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
		Resources: []string{"pods", "pods/ephemeralcontainers"}, Scope: ptr(admissionregistrationv1.NamespacedScope)},
}}

// webhookConfig is the chart's xila-guard-pods configuration
// (templates/webhook-configurations.yaml, pods.webhook.guard.xila.us) with
// a URL in place of the Service: the same rules, namespace selector,
// failure policy, match policy and timeout. Its second webhook, for pods
// of no tenant that name a node, never matches a tenant's namespace and is
// left out.
func webhookConfig(w *webhookProcess, name string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	url := "https://" + w.addr + "/validate-pods"
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfigName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.caPEM},
			Rules:                   podRules,
			NamespaceSelector:       tenantSelector(),
			FailurePolicy:           ptr(admissionregistrationv1.Fail),
			MatchPolicy:             ptr(admissionregistrationv1.Equivalent),
			SideEffects:             ptr(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr(int32(5)),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

// policy is a ValidatingAdmissionPolicy with the webhook's node-independent
// checks of a protected pod that CEL can express without any lookup: no
// privileged container of any kind, no host namespace, no hostPath volume,
// xila-guard-scheduler as the scheduler, and no spec.nodeName at CREATE.
// The webhook does more: the Pod Security baseline, tolerations and
// affinities that reach another tenant's pool, and the tenant's
// resolution and the evaluator's verdict.
func policy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	privileged := func(list string) string {
		return fmt.Sprintf("!object.spec.?%s.orValue([]).exists(c, c.?securityContext.?privileged.orValue(false))", list)
	}
	forbidden := ptr(metav1.StatusReasonForbidden)
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: tenantSelector(),
				ResourceRules:     []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: podRules[0]}},
			},
			Validations: []admissionregistrationv1.Validation{
				{Expression: privileged("containers") + " && " + privileged("initContainers") + " && " + privileged("ephemeralContainers"),
					Reason: forbidden, Message: "PRIVILEGED_CONTAINER: protected pods may not run privileged containers"},
				{Expression: "!object.spec.?hostNetwork.orValue(false) && !object.spec.?hostPID.orValue(false) && !object.spec.?hostIPC.orValue(false)",
					Reason: forbidden, Message: "HOST_NAMESPACE: protected pods may not share the node's network, process or IPC namespace"},
				{Expression: "!object.spec.?volumes.orValue([]).exists(v, has(v.hostPath))",
					Reason: forbidden, Message: "HOST_PATH_VOLUME: protected pods may not mount host paths"},
				{Expression: fmt.Sprintf("object.spec.?schedulerName.orValue('%s') == '%s'", corev1.DefaultSchedulerName, guard.SchedulerName),
					Reason: forbidden, Message: "SCHEDULER_NOT_ALLOWED: protected pods are placed by " + guard.SchedulerName},
				{Expression: "request.operation != 'CREATE' || object.spec.?nodeName.orValue('') == ''",
					Reason: forbidden, Message: "NODE_NAME_SET: spec.nodeName bypasses the scheduler"},
			},
		},
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	return p, b
}

// useVariant leaves exactly the admission objects of variant v registered
// and waits until the API server applies them.
func useVariant(ctx context.Context, c *cluster, hooks map[string]*webhookProcess, v string) error {
	ar := c.Kube.AdmissionregistrationV1()
	var errs []error
	add := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, err)
		}
	}
	if v != variantCEL {
		add(ar.ValidatingAdmissionPolicyBindings().Delete(ctx, policyName, metav1.DeleteOptions{}))
		add(ar.ValidatingAdmissionPolicies().Delete(ctx, policyName, metav1.DeleteOptions{}))
	}
	registered := ""
	cur, err := ar.ValidatingWebhookConfigurations().Get(ctx, webhookConfigName, metav1.GetOptions{})
	switch {
	case err == nil:
		registered = cur.Webhooks[0].Name
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("switching to variant %s: %w", v, err)
	}
	if registered != "" && registered != hookNames[v] {
		add(ar.ValidatingWebhookConfigurations().Delete(ctx, webhookConfigName, metav1.DeleteOptions{}))
		registered = ""
	}
	if hookNames[v] != "" && registered == "" {
		_, err := ar.ValidatingWebhookConfigurations().Create(ctx, webhookConfig(hooks[v], hookNames[v]), metav1.CreateOptions{})
		add(err)
	}
	if v == variantCEL {
		p, b := policy()
		_, err := ar.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{})
		add(err)
		_, err = ar.ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{})
		add(err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("switching to variant %s: %w", v, err)
	}
	return waitApplied(ctx, c, v)
}

// waitApplied probes with dry-run creates until the API server applies
// exactly variant v, three times in a row: a privileged pod is refused by
// the policy, by one of the webhooks or not at all, and a pod only the
// webhooks refuse (a capability the Pod Security baseline forbids) is
// admitted unless a webhook is registered.
func waitApplied(ctx context.Context, c *cluster, v string) error {
	ns := tenantID(0)
	privileged := fixture.Pod(ns, true)
	psaOnly := fixture.Pod(ns, false)
	psaOnly.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
	probe := func(p *corev1.Pod) string {
		_, err := c.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return variantNone
		}
		if strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policyName+"'") {
			return variantCEL
		}
		for hv, name := range hookNames {
			if strings.Contains(err.Error(), `admission webhook "`+name+`"`) {
				return hv
			}
		}
		return "error: " + err.Error()
	}
	wantPSA := variantNone
	if hookNames[v] != "" {
		wantPSA = v
	}
	deadline := time.Now().Add(time.Minute)
	for streak := 0; streak < 3; {
		got, psa := probe(privileged), probe(psaOnly)
		if got == v && psa == wantPSA {
			streak++
		} else {
			streak = 0
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("variant %s not applied after a minute: privileged pod: %s; pod with SYS_ADMIN: %s", v, got, psa)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
