package attester

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Client asks attesters for evidence.
type Client struct {
	// HTTP sends the requests; its timeout, or the context's, bounds each.
	// http.DefaultClient when nil.
	HTTP *http.Client
}

// Evidence sends req to the attester at baseURL (scheme, host and port)
// and returns its evidence. Any answer but a well-formed 200 is an error:
// the attester is unreachable or broken, which says nothing about the
// node's TEE.
func (c *Client) Evidence(ctx context.Context, baseURL string, req *Request) (*Evidence, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(baseURL, "/")+Path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("the answer is larger than %d bytes", MaxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var e ErrorResponse
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			return nil, fmt.Errorf("the attester answered %s: %s", resp.Status, e.Message)
		}
		return nil, fmt.Errorf("the attester answered %s", resp.Status)
	}
	var out Response
	if err := decodeStrict(data, &out); err != nil {
		return nil, fmt.Errorf("the attester's answer: %w", err)
	}
	switch {
	case out.TEE != v1alpha1.TEESEVSNP && out.TEE != v1alpha1.TEETDX:
		return nil, fmt.Errorf("the attester's answer: TEE %q is neither %s nor %s", out.TEE, v1alpha1.TEESEVSNP, v1alpha1.TEETDX)
	case len(out.Evidence) == 0:
		return nil, fmt.Errorf("the attester's answer has no evidence")
	case out.EPCSize < 0:
		return nil, fmt.Errorf("the attester's answer: epcSize %d is negative", out.EPCSize)
	case len(out.Devices) > 0 && len(req.ReportData) > 0:
		return nil, fmt.Errorf("the attester's answer states devices, which a request that gives reportData takes none of")
	}
	if err := CheckDevices(out.Devices); err != nil {
		return nil, fmt.Errorf("the attester's answer: %w", err)
	}
	return &Evidence{TEE: out.TEE, Data: out.Evidence, EPCSize: out.EPCSize, Devices: out.Devices}, nil
}
