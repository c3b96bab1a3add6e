package enforcement

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// DefaultChallengeTimeout bounds a Bind re-challenge by default.
const DefaultChallengeTimeout = time.Second

// MaxChallengeTimeout bounds Args.ChallengeTimeout: a bind waits for it.
const MaxChallengeTimeout = 10 * time.Second

// challenger asks the attestation controller to attest a node now, and
// returns once the node's fresh NodeSecurityState is written (whatever
// its verdict) or with an error.
type challenger interface {
	Challenge(ctx context.Context, node string) error
}

// httpChallenger calls the attestation controller's challenge endpoint,
// POST <base>/v1/challenge/<node> (docs/attest.md).
type httpChallenger struct {
	base    string
	client  *http.Client
	timeout time.Duration
}

func newHTTPChallenger(base string, timeout time.Duration) *httpChallenger {
	return &httpChallenger{base: strings.TrimSuffix(base, "/"), client: &http.Client{}, timeout: timeout}
}

// Challenge returns nil when the controller answered 200: it wrote the
// node's evidence anew, with a Passed or a Failed verdict.
func (c *httpChallenger) Challenge(ctx context.Context, node string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/challenge/"+url.PathEscape(node), nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("challenging node %s: %w", node, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(body))
	}
	return fmt.Errorf("challenging node %s: %s: %s", node, resp.Status, e.Message)
}

// freshAttestationHelps says whether a refusal is one that attesting the
// node anew may lift: the node's evidence is attested, and every reason is
// its age or the absence of a verdict.
func freshAttestationHelps(state *v1alpha1.NodeSecurityStateSpec, reasons []guard.Reason) bool {
	if state == nil || state.Source != v1alpha1.SourceAttested || len(reasons) == 0 {
		return false
	}
	for _, r := range reasons {
		switch r {
		case guard.ReasonAttestationStale, guard.ReasonAttestationMissing, guard.ReasonEvidenceStale:
		default:
			return false
		}
	}
	return true
}
