package verify

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Intel's hosts in the collateral URLs go-tdx-guest asks for: the
// Provisioning Certification Service, and the host of the root CA's CRL.
var intelCollateralHosts = []string{
	"https://api.trustedservices.intel.com",
	"https://certificates.trustedservices.intel.com",
}

// maxCollateralSize bounds one collateral answer; Intel's are a few KiB.
const maxCollateralSize = 1 << 20

// PCS is a TDXCollateral that fetches Intel's collateral over HTTP, from
// Intel's Provisioning Certification Service or from a mirror that serves
// the same paths (an air-gapped cluster's caching proxy), and keeps each
// answer for TTL. Collateral is signed by Intel and checked by the
// verifier, so a mirror is trusted for availability only.
type PCS struct {
	// BaseURL, when set, replaces Intel's hosts in every URL asked, e.g.
	// https://pcs-mirror.infra.svc:8443; the path and query are kept.
	BaseURL string
	// HTTP is the client; its Timeout bounds one fetch.
	HTTP *http.Client
	// TTL is how long an answer is reused. Intel issues TCB info and QE
	// identity for about a month; an hour picks up a new TCB level soon
	// after Intel publishes it.
	TTL time.Duration
	// Clock is the time, for the cache; time.Now when nil.
	Clock func() time.Time

	mu    sync.Mutex
	cache map[string]pcsAnswer
	// fetches coalesces concurrent fetches of one URL: the controller's
	// workers verify many nodes' quotes at once, all with the same
	// collateral.
	fetches singleflight.Group
}

type pcsAnswer struct {
	header  map[string][]string
	body    []byte
	fetched time.Time
}

// Get implements TDXCollateral.
func (p *PCS) Get(url string) (map[string][]string, []byte, error) {
	now := time.Now
	if p.Clock != nil {
		now = p.Clock
	}
	p.mu.Lock()
	if a, ok := p.cache[url]; ok && now().Sub(a.fetched) < p.TTL {
		p.mu.Unlock()
		return a.header, a.body, nil
	}
	p.mu.Unlock()
	v, err, _ := p.fetches.Do(url, func() (any, error) {
		header, body, err := p.fetch(p.rewrite(url))
		if err != nil {
			return nil, err
		}
		a := pcsAnswer{header: header, body: body, fetched: now()}
		p.mu.Lock()
		if p.cache == nil {
			p.cache = map[string]pcsAnswer{}
		}
		p.cache[url] = a
		p.mu.Unlock()
		return a, nil
	})
	if err != nil {
		return nil, nil, err
	}
	a := v.(pcsAnswer)
	return a.header, a.body, nil
}

// rewrite points url at BaseURL when it names one of Intel's hosts.
func (p *PCS) rewrite(url string) string {
	if p.BaseURL == "" {
		return url
	}
	for _, host := range intelCollateralHosts {
		if rest, ok := strings.CutPrefix(url, host); ok && (rest == "" || rest[0] == '/' || rest[0] == '?') {
			return strings.TrimSuffix(p.BaseURL, "/") + rest
		}
	}
	return url
}

func (p *PCS) fetch(url string) (map[string][]string, []byte, error) {
	client := p.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Get(url)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching TDX collateral: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCollateralSize+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("reading TDX collateral from %s: %w", url, err)
	case resp.StatusCode != http.StatusOK:
		return nil, nil, fmt.Errorf("TDX collateral from %s: %s", url, resp.Status)
	case len(body) > maxCollateralSize:
		return nil, nil, fmt.Errorf("TDX collateral from %s is larger than %d bytes", url, maxCollateralSize)
	}
	return resp.Header, body, nil
}
