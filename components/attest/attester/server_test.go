package attester

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
	"github.com/xila-guard/xila-guard/components/attest/verify"
)

// backendFunc adapts a function to Backend.
type backendFunc func(ctx context.Context, rd [nonce.Size]byte) (*Evidence, error)

func (f backendFunc) Name() string { return "test backend" }
func (f backendFunc) Evidence(ctx context.Context, rd [nonce.Size]byte) (*Evidence, error) {
	return f(ctx, rd)
}

func newServer(t *testing.T, b Backend, timeout time.Duration) *httptest.Server {
	t.Helper()
	s, err := New(Config{Backend: b, ReportTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	s.SetReady(true)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestServerRefusesMalformedRequests(t *testing.T) {
	srv := newServer(t, &Lab{Chain: chain(t)}, 0)
	challenge := b64([]byte("0123456789abcdef0123456789abcdef"))
	valid := `{"nodeUID":"uid","incarnation":"inc","challenge":"` + challenge + `"}`
	cases := []struct {
		name, method, contentType, body string
		want                            int
		message                         string
	}{
		{"GET", http.MethodGet, "application/json", "", 405, "use POST"},
		{"not JSON", http.MethodPost, "text/plain", valid, 415, "application/json"},
		{"too large", http.MethodPost, "application/json", `{"nodeUID":"` + strings.Repeat("u", MaxRequestBytes) + `"}`, 413, "larger than"},
		{"unknown field", http.MethodPost, "application/json", `{"nodeUID":"uid","incarnation":"inc","challenge":"` + challenge + `","tee":"x"}`, 400, `unknown field "tee"`},
		{"duplicate field", http.MethodPost, "application/json", `{"nodeUID":"uid","nodeUID":"other","incarnation":"inc","challenge":"` + challenge + `"}`, 400, "duplicate field"},
		{"trailing data", http.MethodPost, "application/json", valid + `{}`, 400, "decoding the body"},
		{"both forms", http.MethodPost, "application/json", `{"nodeUID":"uid","incarnation":"inc","challenge":"` + challenge + `","reportData":"` + b64(make([]byte, 64)) + `"}`, 400, "not both"},
		{"missing parts", http.MethodPost, "application/json", `{"challenge":"` + challenge + `"}`, 400, "nodeUID is required\nincarnation is required"},
		{"short challenge", http.MethodPost, "application/json", `{"nodeUID":"uid","incarnation":"inc","challenge":"` + b64([]byte("short")) + `"}`, 400, "challenge is 5 bytes"},
		{"report data of the wrong size", http.MethodPost, "application/json", `{"reportData":"` + b64(make([]byte, 32)) + `"}`, 400, "reportData is 32 bytes"},
		{"other path", http.MethodPost, "application/json", valid, 404, "no such endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := srv.URL + Path
			if tc.name == "other path" {
				url = srv.URL + "/v1/other"
			}
			req, err := http.NewRequest(tc.method, url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tc.contentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e ErrorResponse
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want || !strings.Contains(e.Message, tc.message) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, e.Message, tc.want, tc.message)
			}
		})
	}
}

// TestServerEvidenceVerifies asks the lab attester both ways and verifies
// the answers as the controller does.
func TestServerEvidenceVerifies(t *testing.T) {
	c := chain(t)
	lab := &Lab{Chain: c, Measurement: [48]byte{1}}
	srv := newServer(t, lab, 0)
	v, err := verify.New(verify.Options{LabSNPRoot: c.RootPEM()})
	if err != nil {
		t.Fatal(err)
	}
	challenge := nonce.NewChallenge()
	want := nonce.For("uid-1", "inc-1", challenge)
	refs := verify.References{Measurements: []verify.Reference{{TEE: v1alpha1.TEESEVSNP, Measurement: v1alpha1.Measurement("sha384:01" + strings.Repeat("0", 94))}}}
	for name, req := range map[string]*Request{
		"parts":       {NodeUID: "uid-1", Incarnation: "inc-1", Challenge: challenge},
		"report data": {ReportData: want[:]},
	} {
		t.Run(name, func(t *testing.T) {
			at := time.Now()
			ev, err := (&Client{}).Evidence(context.Background(), srv.URL, req)
			if err != nil {
				t.Fatal(err)
			}
			res, err := v.Verify(verify.Request{TEE: ev.TEE, Evidence: ev.Data, Nonce: want, ChallengedAt: at, Profile: guard.ProfileLab, References: refs})
			if err != nil {
				t.Fatal(err)
			}
			if res.Root != verify.RootLab {
				t.Errorf("root %s", res.Root)
			}
			// The same answer does not bind another challenge.
			other := nonce.For("uid-1", "inc-1", nonce.NewChallenge())
			_, err = v.Verify(verify.Request{TEE: ev.TEE, Evidence: ev.Data, Nonce: other, ChallengedAt: at, Profile: guard.ProfileLab, References: refs})
			if r, _ := verify.ReasonOf(err); r != guard.ReasonNonceMismatch {
				t.Errorf("another challenge: %v, want NONCE_MISMATCH", err)
			}
		})
	}
}

// TestEPCSizeTravelsBesideTheEvidence: the lab states its EPC size in the
// answer and the client hands it on; a backend that states none leaves it
// out of the answer.
func TestEPCSizeTravelsBesideTheEvidence(t *testing.T) {
	req := &Request{ReportData: make([]byte, nonce.Size)}
	for _, size := range []int64{0, 64 << 20} {
		srv := newServer(t, &Lab{Chain: chain(t), EPCSize: size}, 0)
		ev, err := (&Client{}).Evidence(context.Background(), srv.URL, req)
		if err != nil {
			t.Fatal(err)
		}
		if ev.EPCSize != size {
			t.Errorf("EPC size %d, want %d", ev.EPCSize, size)
		}
		body, _ := json.Marshal(req)
		resp, err := http.Post(srv.URL+Path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := strings.Contains(string(raw), `"epcSize":`); got != (size > 0) {
			t.Errorf("EPC size %d: the answer names epcSize: %v (%.80s…)", size, got, raw)
		}
	}
}

func TestServerBackendFailures(t *testing.T) {
	req := &Request{ReportData: make([]byte, nonce.Size)}
	t.Run("error", func(t *testing.T) {
		srv := newServer(t, backendFunc(func(context.Context, [nonce.Size]byte) (*Evidence, error) {
			return nil, errors.New("the device is gone")
		}), 0)
		_, err := (&Client{}).Evidence(context.Background(), srv.URL, req)
		if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "test backend: the device is gone") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		srv := newServer(t, backendFunc(func(ctx context.Context, _ [nonce.Size]byte) (*Evidence, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}), 50*time.Millisecond)
		start := time.Now()
		_, err := (&Client{}).Evidence(context.Background(), srv.URL, req)
		if err == nil || !strings.Contains(err.Error(), "504") {
			t.Errorf("error %v, want 504", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %s", d)
		}
	})
	t.Run("busy", func(t *testing.T) {
		release := make(chan struct{})
		entered := make(chan struct{}, 2)
		srv := newServer(t, backendFunc(func(ctx context.Context, _ [nonce.Size]byte) (*Evidence, error) {
			entered <- struct{}{}
			<-release
			return &Evidence{TEE: v1alpha1.TEESEVSNP, Data: []byte{1}}, nil
		}), 100*time.Millisecond)
		first := make(chan error, 1)
		go func() {
			_, err := (&Client{}).Evidence(context.Background(), srv.URL, req)
			first <- err
		}()
		<-entered
		_, err := (&Client{}).Evidence(context.Background(), srv.URL, req)
		if err == nil || !strings.Contains(err.Error(), "503") {
			t.Errorf("second request while the first holds the TEE: %v, want 503", err)
		}
		close(release)
		if err := <-first; err != nil {
			t.Errorf("first request: %v", err)
		}
	})
}

func TestClientRefusesBadAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"error", 500, `{"message":"boom"}`, "500 Internal Server Error: boom"},
		{"error without message", 502, `<html>`, "502 Bad Gateway"},
		{"unknown TEE", 200, `{"tee":"SGX","evidence":"AQ=="}`, `TEE "SGX"`},
		{"no evidence", 200, `{"tee":"SEV-SNP"}`, "no evidence"},
		{"unknown field", 200, `{"tee":"SEV-SNP","evidence":"AQ==","extra":1}`, `unknown field "extra"`},
		{"negative EPC size", 200, `{"tee":"SEV-SNP","evidence":"AQ==","epcSize":-1}`, "epcSize -1 is negative"},
		{"fractional EPC size", 200, `{"tee":"SEV-SNP","evidence":"AQ==","epcSize":1.5}`, "decoding the body"},
		{"EPC size as a string", 200, `{"tee":"SEV-SNP","evidence":"AQ==","epcSize":"64Mi"}`, "decoding the body"},
		{"duplicate EPC size", 200, `{"tee":"SEV-SNP","evidence":"AQ==","epcSize":1,"epcSize":2}`, "duplicate field"},
		{"not JSON", 200, `evidence`, "decoding the body"},
		{"too large", 200, `{"tee":"SEV-SNP","evidence":"` + strings.Repeat("A", MaxResponseBytes) + `"}`, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			_, err := (&Client{}).Evidence(context.Background(), srv.URL, &Request{ReportData: make([]byte, nonce.Size)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := (&Client{}).Evidence(context.Background(), "http://127.0.0.1:1", &Request{}); err == nil {
		t.Error("no error from an address nothing listens on")
	}
}

func TestServerProbesAndMetrics(t *testing.T) {
	s, err := New(Config{Backend: &Lab{Chain: chain(t)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz before SetReady: %d", code)
	}
	s.SetReady(true)
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz: %d", code)
	}
	if _, err := (&Client{}).Evidence(context.Background(), srv.URL, &Request{ReportData: make([]byte, nonce.Size)}); err != nil {
		t.Fatal(err)
	}
	_, _ = http.Post(srv.URL+Path, "application/json", bytes.NewReader([]byte("{}")))
	_, metrics := get("/metrics")
	for _, want := range []string{`xila_guard_attest_attester_requests_total{code="200"} 1`, `xila_guard_attest_attester_requests_total{code="400"} 1`,
		"xila_guard_attest_attester_report_duration_seconds_count 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
}
