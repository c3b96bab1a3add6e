package arm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CheckOptions say what `xila-guard-webhook check` (the chart's helm test)
// asks.
type CheckOptions struct {
	// Validating is the configuration whose webhook must answer.
	Validating string
	// CoreURL is the evaluator API's base URL; empty when none runs.
	CoreURL string
	// SchedulerNamespace and SchedulerSelector find the controlled
	// scheduler's pods, each of which must be ready; empty when none runs.
	SchedulerNamespace, SchedulerSelector string
	// SchedulerPort is the port of its /readyz; 10259 when zero.
	SchedulerPort int
	// Timeout bounds each probe, retried every second until it passes.
	Timeout time.Duration
}

// Result is one probe's outcome.
type Result struct {
	What string
	Err  error
}

// Check probes the webhook, the evaluator API and the controlled scheduler
// once each, and returns every outcome; err is set when one failed.
func Check(ctx context.Context, kube kubernetes.Interface, o CheckOptions) ([]Result, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	var out []Result
	if o.Validating != "" {
		err := retry(ctx, o.Timeout, func(ctx context.Context) error {
			cc, err := clientConfig(ctx, kube, Options{Validating: []string{o.Validating}})
			if err == nil {
				err = Probe(ctx, cc, "")
			}
			return err
		})
		out = append(out, Result{"webhook " + o.Validating + " answers an AdmissionReview", err})
	}
	if o.CoreURL != "" {
		err := retry(ctx, o.Timeout, func(ctx context.Context) error {
			return get(ctx, strings.TrimSuffix(o.CoreURL, "/")+"/readyz", o.Timeout, false)
		})
		out = append(out, Result{"evaluator " + o.CoreURL + " is ready", err})
	}
	if o.SchedulerSelector != "" {
		pods, err := kube.CoreV1().Pods(o.SchedulerNamespace).List(ctx, metav1.ListOptions{LabelSelector: o.SchedulerSelector})
		switch {
		case err != nil:
			out = append(out, Result{"controlled scheduler", err})
		case len(pods.Items) == 0:
			out = append(out, Result{"controlled scheduler", errors.New("no pod matches " + o.SchedulerSelector)})
		}
		if err == nil {
			for _, p := range pods.Items {
				// kube-scheduler's serving certificate is self-signed:
				// this asks whether it answers, not whom to trust.
				port := o.SchedulerPort
				if port == 0 {
					port = 10259
				}
				url := "https://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)) + "/readyz"
				err := retry(ctx, o.Timeout, func(ctx context.Context) error { return get(ctx, url, o.Timeout, true) })
				out = append(out, Result{"scheduler " + p.Name + " is ready", err})
			}
		}
	}
	var failed []string
	for _, r := range out {
		if r.Err != nil {
			failed = append(failed, r.What)
		}
	}
	if len(failed) > 0 {
		return out, fmt.Errorf("%d of %d checks failed: %s", len(failed), len(out), strings.Join(failed, "; "))
	}
	return out, nil
}

// retry runs probe every second until it succeeds or timeout passes, and
// returns its last error: a component that just became ready may take a
// moment to be reachable through its Service.
func retry(ctx context.Context, timeout time.Duration, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// get asks url for a 200.
func get(ctx context.Context, url string, timeout time.Duration, insecure bool) error {
	hc := &http.Client{Timeout: timeout}
	if insecure {
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // a liveness question, no data
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
