package kbs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/go-jose/go-jose/v4"
)

// Paths of the protocol.
const (
	PathAuth     = "/kbs/v0/auth"
	PathAttest   = "/kbs/v0/attest"
	PathResource = "/kbs/v0/resource/"
	// CookieName is the session cookie.
	CookieName = "kbs-session-id"
	// ProtocolVersion is the version of the protocol the broker speaks;
	// a Request with another major version is refused.
	ProtocolVersion = "0.1.0"
	// maxBody bounds a request body: an Attestation carries a token of a
	// few kilobytes and a public key.
	maxBody = 32 << 10
)

// Request opens a session (POST /kbs/v0/auth).
type Request struct {
	// Version is the protocol version of the client.
	Version string `json:"version"`
	// TEE is the client's TEE: snp or tdx (the KBS names of AMD SEV-SNP
	// and Intel TDX).
	TEE string `json:"tee"`
	// ExtraParams is reserved; anything in it is ignored.
	ExtraParams json.RawMessage `json:"extra-params,omitempty"`
}

// Challenge answers a Request.
type Challenge struct {
	// Nonce is 32 random bytes, base64url without padding; the
	// Attestation's runtime data must echo it.
	Nonce string `json:"nonce"`
	// ExtraParams is always an empty object.
	ExtraParams json.RawMessage `json:"extra-params"`
}

// Attestation proves the client's identity (POST /kbs/v0/attest).
type Attestation struct {
	// RuntimeData binds the session's nonce and the key to encrypt to.
	RuntimeData RuntimeData `json:"runtime-data"`
	// TEEEvidence is the client's evidence.
	TEEEvidence Evidence `json:"tee-evidence"`
	// InitData is accepted and ignored: the node's launch configuration is
	// what its attested evidence pins.
	InitData json.RawMessage `json:"init-data,omitempty"`
}

// RuntimeData is the data the client binds to its attestation.
type RuntimeData struct {
	// Nonce is the Challenge's nonce.
	Nonce string `json:"nonce"`
	// TEEPubKey is the public key (RFC 7517 JWK) the keys are encrypted to.
	TEEPubKey json.RawMessage `json:"tee-pubkey"`
}

// Evidence is what a pod presents: its projected service-account token.
type Evidence struct {
	// Token is a projected service-account token with the audience
	// xila-guard-kbs, bound to the pod.
	Token string `json:"token"`
}

// Problem is an error answer, RFC 7807 problem details as KBS writes
// them, with the reason code as an extension member.
type Problem struct {
	// Type is urn:xila-guard:kbs:<reason>, or urn:xila-guard:kbs:request
	// for a malformed request.
	Type string `json:"type"`
	// Detail explains the refusal.
	Detail string `json:"detail"`
	// Reason is the reason code; empty for a malformed request.
	Reason string `json:"reason,omitempty"`
}

// ProblemType returns the Type of a refusal with the reason.
func ProblemType(reason string) string { return "urn:xila-guard:kbs:" + reason }

// decodeStrict decodes one JSON value of at most maxBody bytes into v,
// refusing unknown fields and trailing data.
func decodeStrict(r io.Reader, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	if len(data) > maxBody {
		return fmt.Errorf("the body is larger than %d bytes", maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding the body: %w", err)
	}
	if dec.More() {
		return errors.New("decoding the body: data after the JSON value")
	}
	return nil
}

// PublicKey parses a tee-pubkey: a public RSA key of at least 2048 bits,
// or a public EC key on P-256, P-384 or P-521. It returns the JWE key
// management algorithm the broker encrypts with: RSA-OAEP-256, or
// ECDH-ES+A256KW.
func PublicKey(raw json.RawMessage) (*jose.JSONWebKey, jose.KeyAlgorithm, error) {
	var k jose.JSONWebKey
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, "", fmt.Errorf("tee-pubkey is not a JWK: %w", err)
	}
	if !k.Valid() || !k.IsPublic() {
		return nil, "", errors.New("tee-pubkey is not a valid public key")
	}
	alg, err := keyAlgorithm(&k)
	if err != nil {
		return nil, "", err
	}
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return nil, "", fmt.Errorf("tee-pubkey asks for alg %s; the broker encrypts to this key with %s", k.Algorithm, alg)
	}
	return &k, alg, nil
}
