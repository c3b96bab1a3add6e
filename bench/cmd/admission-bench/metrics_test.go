package main

import (
	"testing"
	"time"
)

const sampleMetrics = `# HELP apiserver_admission_webhook_admission_duration_seconds [STABLE] Admission webhook latency histogram in seconds.
# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.webhook.guard.xila.us",operation="CREATE",rejected="false",type="validating",le="0.005"} 90
apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.webhook.guard.xila.us",operation="CREATE",rejected="false",type="validating",le="0.025"} 99
apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.webhook.guard.xila.us",operation="CREATE",rejected="false",type="validating",le="+Inf"} 100
apiserver_admission_webhook_admission_duration_seconds_sum{name="pods.webhook.guard.xila.us",operation="CREATE",rejected="false",type="validating"} 0.4
apiserver_admission_webhook_admission_duration_seconds_count{name="pods.webhook.guard.xila.us",operation="CREATE",rejected="false",type="validating"} 100
apiserver_admission_webhook_admission_duration_seconds_bucket{name="other",operation="CREATE",rejected="false",type="validating",le="0.005"} 7
apiserver_admission_webhook_admission_duration_seconds_bucket{name="other",operation="CREATE",rejected="false",type="validating",le="0.025"} 7
apiserver_admission_webhook_admission_duration_seconds_bucket{name="other",operation="CREATE",rejected="false",type="validating",le="+Inf"} 7
apiserver_admission_webhook_admission_duration_seconds_sum{name="other",operation="CREATE",rejected="false",type="validating"} 0.01
apiserver_admission_webhook_admission_duration_seconds_count{name="other",operation="CREATE",rejected="false",type="validating"} 7
# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",verb="POST"} 5
`

func TestHistogram(t *testing.T) {
	fams, err := parseMetrics([]byte(sampleMetrics), metricWebhook)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fams["apiserver_request_total"]; ok {
		t.Error("a family not asked for was kept")
	}
	h := fams.histogram(metricWebhook, labels{"name": hookNames[variantWebhook]})
	if h.count != 100 || h.mean() != 4*time.Millisecond {
		t.Fatalf("count %v mean %v, want 100 and 4ms", h.count, h.mean())
	}
	for _, tc := range []struct {
		name     string
		h        histogram
		q        float64
		quantile time.Duration
		bound    string
	}{
		{"median in the first bucket", h, 0.5, 2777777, "≤ 5 ms"},
		{"p99 at the second bound", h, 0.99, 25 * time.Millisecond, "≤ 25 ms"},
		{"max beyond every bound", h, 1, 25 * time.Millisecond, "> 25 ms"},
		{"since itself is empty", h.since(h), 0.99, 0, "—"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.h.quantile(tc.q); got != tc.quantile {
				t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.quantile)
			}
			if got := tc.h.bound(tc.q); got != tc.bound {
				t.Errorf("bound(%v) = %q, want %q", tc.q, got, tc.bound)
			}
		})
	}
	both := fams.histogram(metricWebhook, nil)
	if both.count != 107 {
		t.Errorf("every series summed: count %v, want 107", both.count)
	}
}

func TestRotate(t *testing.T) {
	vs := []string{"a", "b", "c"}
	for k, want := range []string{"abc", "bca", "cab", "abc"} {
		got := ""
		for _, v := range rotate(vs, k) {
			got += v
		}
		if got != want {
			t.Errorf("rotate(%d) = %s, want %s", k, got, want)
		}
	}
}
