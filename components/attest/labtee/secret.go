package labtee

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-sev-guest/kds"

	"github.com/xila-guard/xila-guard/components/attest/evidence"
)

// Keys of the Secret that holds a chain. Only SecretCertChain is public;
// mount it alone where the verifier runs, and the keys only where the
// software TEE signs.
const (
	// SecretCertChain holds the ASK and ARK certificates in PEM, in that
	// order, as AMD's key distribution service serves a product's
	// cert_chain: the lab root the verifier trusts under the lab profile.
	SecretCertChain = "cert_chain.pem"
	// SecretVCEK holds the VCEK certificate in PEM.
	SecretVCEK = "vcek.pem"
	// SecretVCEKKey holds the VCEK's private key (PKCS #8, PEM).
	SecretVCEKKey = "vcek-key.pem"
	// SecretASKKey holds the ASK's private key (PKCS #8, PEM), with which
	// the software TEE endorses its VCEK for another TCB. Optional.
	SecretASKKey = "ask-key.pem"
)

// RootPEM returns the chain's root of trust as the verifier takes it: the
// ASK and ARK certificates in PEM (SecretCertChain).
func (c *Chain) RootPEM() []byte {
	return append(certPEM(c.ASK), certPEM(c.ARK)...)
}

// SecretData returns the chain as the data of a Kubernetes Secret. The ARK
// key is not kept: nothing needs to issue another ASK.
func (c *Chain) SecretData() (map[string][]byte, error) {
	vcekKey, err := keyPEM(c.vcekKey)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{
		SecretCertChain: c.RootPEM(),
		SecretVCEK:      certPEM(c.VCEK),
		SecretVCEKKey:   vcekKey,
	}
	if c.askKey != nil {
		if data[SecretASKKey], err = keyPEM(c.askKey); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// ParseSecretData reads a chain from the data of its Secret and checks that
// its certificates chain and its keys match them.
func ParseSecretData(data map[string][]byte) (*Chain, error) {
	ask, ark, err := parseCertChain(data[SecretCertChain])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SecretCertChain, err)
	}
	vcek, err := parseCert(data[SecretVCEK])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SecretVCEK, err)
	}
	if err := vcek.CheckSignatureFrom(ask); err != nil {
		return nil, fmt.Errorf("the VCEK is not signed by the ASK: %w", err)
	}
	line, ok := strings.CutPrefix(ask.Subject.CommonName, "SEV-")
	if _, known := products[line]; !ok || !known {
		return nil, fmt.Errorf("the ASK's common name %q names no supported product line", ask.Subject.CommonName)
	}
	exts, err := kds.VcekCertificateExtensions(vcek)
	if err != nil {
		return nil, fmt.Errorf("the VCEK certificate: %w", err)
	}
	c := &Chain{ProductLine: line, ARK: ark, ASK: ask, VCEK: vcek, TCB: evidence.SNPTCBFromVersion(uint64(exts.TCBVersion))}
	copy(c.ChipID[:], exts.HWID)
	key, err := parseKey(data[SecretVCEKKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SecretVCEKKey, err)
	}
	vcekKey, ok := key.(*ecdsa.PrivateKey)
	if !ok || !vcekKey.PublicKey.Equal(vcek.PublicKey) {
		return nil, fmt.Errorf("%s is not the VCEK certificate's key", SecretVCEKKey)
	}
	c.vcekKey = vcekKey
	if pemKey, ok := data[SecretASKKey]; ok {
		key, err := parseKey(pemKey)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SecretASKKey, err)
		}
		askKey, ok := key.(*rsa.PrivateKey)
		if !ok || !askKey.PublicKey.Equal(ask.PublicKey) {
			return nil, fmt.Errorf("%s is not the ASK certificate's key", SecretASKKey)
		}
		c.askKey = askKey
	}
	return c, nil
}

// ReadSecretDir reads a chain from a directory with one file per Secret
// key, as a Secret volume mounts it. The ASK key may be missing.
func ReadSecretDir(dir string) (*Chain, error) {
	data := map[string][]byte{}
	for _, key := range []string{SecretCertChain, SecretVCEK, SecretVCEKKey, SecretASKKey} {
		b, err := os.ReadFile(filepath.Join(dir, key))
		switch {
		case errors.Is(err, os.ErrNotExist) && key == SecretASKKey:
		case err != nil:
			return nil, err
		default:
			data[key] = b
		}
	}
	return ParseSecretData(data)
}

// parseCertChain reads an ASK and an ARK in PEM, in that order, and checks
// that the ARK signed itself and the ASK.
func parseCertChain(data []byte) (ask, ark *x509.Certificate, err error) {
	askBlock, rest := pem.Decode(data)
	arkBlock, rest := pem.Decode(rest)
	if askBlock == nil || arkBlock == nil || len(bytes.TrimSpace(rest)) != 0 {
		return nil, nil, errors.New("want exactly two PEM certificates, the ASK then the ARK")
	}
	if ask, err = parseCert(pem.EncodeToMemory(askBlock)); err != nil {
		return nil, nil, err
	}
	if ark, err = parseCert(pem.EncodeToMemory(arkBlock)); err != nil {
		return nil, nil, err
	}
	if err := ark.CheckSignatureFrom(ark); err != nil {
		return nil, nil, fmt.Errorf("the ARK is not self-signed: %w", err)
	}
	if err := ask.CheckSignatureFrom(ark); err != nil {
		return nil, nil, fmt.Errorf("the ASK is not signed by the ARK: %w", err)
	}
	return ask, ark, nil
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("want one PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func parseKey(data []byte) (any, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("want one PEM private key (PKCS #8)")
	}
	return x509.ParsePKCS8PrivateKey(block.Bytes)
}

func certPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

func keyPEM(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
