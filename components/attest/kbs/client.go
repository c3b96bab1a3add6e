package kbs

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"

	"github.com/go-jose/go-jose/v4"
)

// Client fetches keys from a key broker: auth, attest with the token,
// then one GET per resource, all in one session. It is what a workload
// (or xila-guard-attest kbs-client) runs.
type Client struct {
	// URL is the broker's base URL, e.g. http://xila-guard-kbs.xila-guard-system.svc:8082.
	URL string
	// HTTP is the client; its Jar is replaced by a fresh one per session.
	HTTP *http.Client
	// TEE is the tee of the Request: snp or tdx.
	TEE string
}

// RefusedError is a broker's refusal.
type RefusedError struct {
	// Status is the HTTP status.
	Status int
	// Problem is the broker's answer.
	Problem Problem
}

func (e *RefusedError) Error() string {
	if e.Problem.Reason != "" {
		return fmt.Sprintf("refused (%d): %s: %s", e.Status, e.Problem.Reason, e.Problem.Detail)
	}
	return fmt.Sprintf("refused (%d): %s", e.Status, e.Problem.Detail)
}

// Session is an attested session.
type Session struct {
	c    *Client
	http *http.Client
	key  crypto.Signer
}

// Attest opens a session and attests it with the token, binding the
// public half of key (an *ecdsa.PrivateKey or *rsa.PrivateKey).
func (c *Client) Attest(ctx context.Context, token string, key crypto.Signer) (*Session, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Jar: jar}
	if c.HTTP != nil {
		cp := *c.HTTP
		cp.Jar = jar
		hc = &cp
	}
	tee := c.TEE
	if tee == "" {
		tee = "snp"
	}
	var ch Challenge
	if err := c.post(ctx, hc, PathAuth, Request{Version: ProtocolVersion, TEE: tee, ExtraParams: json.RawMessage("{}")}, &ch); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	pub, err := json.Marshal(jose.JSONWebKey{Key: key.Public()})
	if err != nil {
		return nil, fmt.Errorf("encoding the public key: %w", err)
	}
	att := Attestation{RuntimeData: RuntimeData{Nonce: ch.Nonce, TEEPubKey: pub}, TEEEvidence: Evidence{Token: token}}
	if err := c.post(ctx, hc, PathAttest, att, nil); err != nil {
		return nil, fmt.Errorf("attest: %w", err)
	}
	return &Session{c: c, http: hc, key: key}, nil
}

// Resource fetches and decrypts one resource, "<repository>/<type>/<tag>".
func (s *Session) Resource(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(s.c.URL, "/")+PathResource+path, nil)
	if err != nil {
		return nil, err
	}
	body, err := do(s.http, req, http.StatusOK)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", path, err)
	}
	obj, err := jose.ParseEncryptedJSON(string(body), []jose.KeyAlgorithm{jose.ECDH_ES_A256KW, jose.RSA_OAEP_256},
		[]jose.ContentEncryption{contentEncryption})
	if err != nil {
		return nil, fmt.Errorf("resource %s: the answer is not a JWE: %w", path, err)
	}
	key, err := obj.Decrypt(s.key)
	if err != nil {
		return nil, fmt.Errorf("resource %s: decrypting: %w", path, err)
	}
	return key, nil
}

func (c *Client) post(ctx context.Context, hc *http.Client, path string, in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	want := http.StatusOK
	if out == nil {
		want = http.StatusNoContent
	}
	body, err := do(hc, req, want)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(body, out)
}

// do sends the request and returns the body of an answer with the wanted
// status, or a *RefusedError.
func do(hc *http.Client, req *http.Request, want int) ([]byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		e := &RefusedError{Status: resp.StatusCode}
		if json.Unmarshal(body, &e.Problem) != nil {
			e.Problem.Detail = strings.TrimSpace(string(body))
		}
		return nil, e
	}
	return body, nil
}
