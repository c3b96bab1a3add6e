// Package arm turns the chart's webhook configurations fail-closed once a
// webhook replica answers: `xila-guard-webhook arm`, run by the chart's
// post-install, post-upgrade and post-rollback hook.
//
// A configuration the chart creates for the first time is created with
// failurePolicy Ignore, so that installing the chart opens no window in
// which the API server refuses every pod of a tenant's namespace because
// no replica is up yet. arm waits until the webhook answers a real
// AdmissionReview over TLS, at its Service, with the CA bundle of the
// configuration, and then sets failurePolicy Fail on every webhook of the
// configurations. When no replica answers within the timeout it sets Fail
// all the same and reports the failure: the guards are never left open.
package arm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Options say what to arm.
type Options struct {
	// Validating and Mutating are the names of the configurations.
	Validating, Mutating []string
	// Timeout bounds the wait for an answering replica.
	Timeout time.Duration
	// Interval is the time between two probes.
	Interval time.Duration
	// Dial, when set, replaces the Service's address (tests, or a webhook
	// reached through a port-forward): host:port.
	Dial string
}

// ErrNotAnswering is returned when no replica answered within the timeout;
// the configurations are armed all the same.
var ErrNotAnswering = errors.New("no webhook replica answered")

// Run waits for the webhook and arms the configurations. It returns
// ErrNotAnswering (wrapped) when it armed them without an answer.
func Run(ctx context.Context, kube kubernetes.Interface, o Options, log *slog.Logger) error {
	if len(o.Validating)+len(o.Mutating) == 0 {
		return errors.New("no configuration to arm: give --validating or --mutating")
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	answered := waitAnswer(ctx, kube, o, log)
	for _, name := range o.Validating {
		if err := armValidating(ctx, kube, name); err != nil {
			return err
		}
		log.Info("armed", "validatingWebhookConfiguration", name, "failurePolicy", admissionregistrationv1.Fail)
	}
	for _, name := range o.Mutating {
		if err := armMutating(ctx, kube, name); err != nil {
			return err
		}
		log.Info("armed", "mutatingWebhookConfiguration", name, "failurePolicy", admissionregistrationv1.Fail)
	}
	if answered != nil {
		return fmt.Errorf("%w within %s (%v); the webhook configurations are fail-closed all the same, so admission in tenant namespaces fails until a replica is ready", ErrNotAnswering, o.Timeout, answered)
	}
	return nil
}

// waitAnswer probes the first webhook of the first configuration until it
// answers or the timeout passes; it returns the last error, nil on an
// answer.
func waitAnswer(ctx context.Context, kube kubernetes.Interface, o Options, log *slog.Logger) error {
	var last error
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	_ = wait.PollUntilContextCancel(ctx, o.Interval, true, func(ctx context.Context) (bool, error) {
		cc, err := clientConfig(ctx, kube, o)
		if err == nil {
			err = Probe(ctx, cc, o.Dial)
		}
		if err != nil {
			if last == nil || last.Error() != err.Error() {
				log.Info("waiting for a webhook replica", "reason", err.Error())
			}
			last = err
			return false, nil
		}
		log.Info("a webhook replica answered", "service", cc.Service.Namespace+"/"+cc.Service.Name)
		last = nil
		return true, nil
	})
	if last == nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return last
}

// clientConfig is the client config of the first webhook, once it has a
// CA bundle (cert-manager may inject it after the configuration exists).
func clientConfig(ctx context.Context, kube kubernetes.Interface, o Options) (*admissionregistrationv1.WebhookClientConfig, error) {
	var cc *admissionregistrationv1.WebhookClientConfig
	if len(o.Validating) > 0 {
		v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, o.Validating[0], metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if len(v.Webhooks) > 0 {
			cc = &v.Webhooks[0].ClientConfig
		}
	} else {
		m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, o.Mutating[0], metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if len(m.Webhooks) > 0 {
			cc = &m.Webhooks[0].ClientConfig
		}
	}
	switch {
	case cc == nil:
		return nil, errors.New("the configuration has no webhook")
	case cc.Service == nil:
		return nil, errors.New("the webhook is not called through a Service")
	case len(cc.CABundle) == 0:
		return nil, errors.New("the configuration has no CA bundle yet")
	}
	return cc, nil
}

// ProbeUser is the user the probe's AdmissionReview names. No rule reads
// it; it tells the probe apart in the webhook's logs.
const ProbeUser = "xila-guard:admission-probe"

// Probe sends one AdmissionReview (a pod in the webhook's own namespace,
// which no rule judges) to the webhook of cc and checks that it answers
// for that request. dial, when set, replaces the Service's address.
func Probe(ctx context.Context, cc *admissionregistrationv1.WebhookClientConfig, dial string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cc.CABundle) {
		return errors.New("the CA bundle holds no PEM certificate")
	}
	svc := cc.Service
	host := svc.Name + "." + svc.Namespace + ".svc"
	port := int32(443)
	if svc.Port != nil {
		port = *svc.Port
	}
	addr := fmt.Sprintf("%s:%d", host, port)
	if dial != "" {
		addr = dial
	}
	path := "/"
	if svc.Path != nil {
		path = *svc.Path
	}
	uid := types.UID(fmt.Sprintf("xila-guard-arm-%d", time.Now().UnixNano()))
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: uid, Operation: admissionv1.Create,
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: svc.Namespace, Name: "xila-guard-arm-probe",
			// A name, not an account: the probe is sent by arm and by
			// helm test's check, under whatever names the release has.
			UserInfo: authenticationv1.UserInfo{Username: ProbeUser},
			Object:   runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"xila-guard-arm-probe","namespace":"` + svc.Namespace + `"},"spec":{"containers":[{"name":"probe","image":"probe"}]}}`)},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the webhook answered %s", resp.Status)
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &got); err != nil {
		return fmt.Errorf("the webhook's answer is no AdmissionReview: %w", err)
	}
	if got.Response == nil || got.Response.UID != uid {
		return errors.New("the webhook's answer is not for the request")
	}
	return nil
}

// webhookConfigs is what arm needs of the client of Validating- or
// MutatingWebhookConfigurations.
type webhookConfigs[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

func armValidating(ctx context.Context, kube kubernetes.Interface, name string) error {
	return armConfiguration(ctx, kube.AdmissionregistrationV1().ValidatingWebhookConfigurations(), "ValidatingWebhookConfiguration", name,
		func(v *admissionregistrationv1.ValidatingWebhookConfiguration) (open []string) {
			for _, w := range v.Webhooks {
				open = appendOpen(open, w.Name, w.FailurePolicy)
			}
			return open
		})
}

func armMutating(ctx context.Context, kube kubernetes.Interface, name string) error {
	return armConfiguration(ctx, kube.AdmissionregistrationV1().MutatingWebhookConfigurations(), "MutatingWebhookConfiguration", name,
		func(m *admissionregistrationv1.MutatingWebhookConfiguration) (open []string) {
			for _, w := range m.Webhooks {
				open = appendOpen(open, w.Name, w.FailurePolicy)
			}
			return open
		})
}

// appendOpen appends the webhook name when its failurePolicy is not Fail.
func appendOpen(open []string, name string, policy *admissionregistrationv1.FailurePolicyType) []string {
	if policy == nil || *policy != admissionregistrationv1.Fail {
		return append(open, name)
	}
	return open
}

// armConfiguration reads the configuration name of kind and sets Fail on
// the webhooks open lists.
func armConfiguration[T any](ctx context.Context, c webhookConfigs[T], kind, name string, open func(T) []string) error {
	cfg, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	return patch(ctx, open(cfg), func(p []byte) error {
		_, err := c.Patch(ctx, name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: "xila-guard-webhook-arm"})
		return err
	})
}

// patch sets failurePolicy Fail on the named webhooks with one strategic
// merge patch (the webhooks list merges by name).
func patch(ctx context.Context, names []string, apply func([]byte) error) error {
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	type hook struct {
		Name          string `json:"name"`
		FailurePolicy string `json:"failurePolicy"`
	}
	hooks := make([]hook, len(names))
	for i, n := range names {
		hooks[i] = hook{n, string(admissionregistrationv1.Fail)}
	}
	p, err := json.Marshal(map[string]any{"webhooks": hooks})
	if err != nil {
		return err
	}
	var last error
	err = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 5}, func(context.Context) (bool, error) {
		last = apply(p)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("setting failurePolicy Fail on %v: %w", names, last)
	}
	return err
}
