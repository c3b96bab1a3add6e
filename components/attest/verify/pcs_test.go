package verify

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tdxtesting "github.com/google/go-tdx-guest/testing"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// collateralMirror serves go-tdx-guest's collateral for its real quote at
// Intel's paths, as a mirror of Intel's PCS would, and counts requests.
func collateralMirror(t *testing.T, status *atomic.Int32) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if code := status.Load(); code != 0 {
			http.Error(w, "unavailable", int(code))
			return
		}
		for _, host := range intelCollateralHosts {
			if answer, ok := tdxtesting.TestGetter.Responses[host+r.URL.RequestURI()]; ok {
				for k, vs := range answer.Header {
					for _, v := range vs {
						w.Header().Add(k, v)
					}
				}
				_, _ = w.Write(answer.Body)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestPCSMirror verifies the real TDX quote with its collateral fetched
// over HTTP from a mirror: the same verdict as from the library's getter
// (Intel rates the quote's TCB out of date), each answer cached for its
// TTL, and a mirror that fails refusing the quote.
func TestPCSMirror(t *testing.T) {
	raw := realTDX(t)
	var status atomic.Int32
	srv, hits := collateralMirror(t, &status)
	clock := tdxNow
	pcs := &PCS{BaseURL: srv.URL + "/", HTTP: srv.Client(), TTL: time.Hour, Clock: func() time.Time { return clock }}
	v := newVerifier(t, tdxNow, Options{TDXCollateral: pcs})

	_, err := v.Verify(tdxRequest(raw))
	wantReason(t, err, guard.ReasonTCBOutOfDate)
	fetched := hits.Load()
	if fetched == 0 {
		t.Fatal("the mirror was never asked")
	}

	// Within the TTL, answers come from the cache even while the mirror
	// fails.
	status.Store(http.StatusServiceUnavailable)
	clock = tdxNow.Add(59 * time.Minute)
	_, err = v.Verify(tdxRequest(raw))
	wantReason(t, err, guard.ReasonTCBOutOfDate)
	if hits.Load() != fetched {
		t.Errorf("the mirror was asked %d more times within the TTL", hits.Load()-fetched)
	}

	// Past it, a failing mirror leaves the platform unrated: refused.
	clock = tdxNow.Add(61 * time.Minute)
	_, err = v.Verify(tdxRequest(raw))
	wantReason(t, err, guard.ReasonQuoteInvalid)
	if !strings.Contains(err.Error(), "503") {
		t.Errorf("the refusal does not say what the mirror answered: %v", err)
	}
}

func TestPCSRewrite(t *testing.T) {
	p := &PCS{BaseURL: "https://mirror.infra:8443/"}
	for in, want := range map[string]string{
		"https://api.trustedservices.intel.com/tdx/certification/v4/tcb?fmspc=50806f000000": "https://mirror.infra:8443/tdx/certification/v4/tcb?fmspc=50806f000000",
		"https://certificates.trustedservices.intel.com/IntelSGXRootCA.der":                 "https://mirror.infra:8443/IntelSGXRootCA.der",
		"https://api.trustedservices.intel.com.evil.example/x":                              "https://api.trustedservices.intel.com.evil.example/x",
		"https://elsewhere.example/crl":                                                     "https://elsewhere.example/crl",
	} {
		if got := p.rewrite(in); got != want {
			t.Errorf("rewrite(%s) = %s, want %s", in, got, want)
		}
	}
	if got := (&PCS{}).rewrite("https://api.trustedservices.intel.com/x"); got != "https://api.trustedservices.intel.com/x" {
		t.Errorf("no BaseURL rewrote to %s", got)
	}
}

func TestPCSRefusesOversizedAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(make([]byte, maxCollateralSize+1))
	}))
	defer srv.Close()
	p := &PCS{BaseURL: srv.URL, HTTP: srv.Client(), TTL: time.Hour}
	if _, _, err := p.Get("https://api.trustedservices.intel.com/tdx/certification/v4/qe/identity"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversized answer: %v", err)
	}
}

// TestPCSCoalescesConcurrentFetches: workers verifying many quotes at once
// ask the mirror once per URL.
func TestPCSCoalescesConcurrentFetches(t *testing.T) {
	var hits atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		<-release
		_, _ = w.Write([]byte("collateral"))
	}))
	defer srv.Close()
	p := &PCS{BaseURL: srv.URL, HTTP: srv.Client(), TTL: time.Hour}
	const workers = 8
	errs := make(chan error, workers)
	for range workers {
		go func() {
			_, body, err := p.Get("https://api.trustedservices.intel.com/tdx/certification/v4/qe/identity")
			if err == nil && string(body) != "collateral" {
				err = errors.New("wrong body " + string(body))
			}
			errs <- err
		}()
	}
	time.Sleep(100 * time.Millisecond) // let every worker reach the fetch
	close(release)
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := hits.Load(); got != 1 {
		t.Errorf("the mirror was asked %d times for one URL, want once", got)
	}
}
