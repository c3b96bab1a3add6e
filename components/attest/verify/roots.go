package verify

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	_ "embed"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-sev-guest/verify/trust"
)

// intelRootPEM is Intel's SGX Root CA, the root of every TDX PCK
// certificate chain and of the collateral's signing chain. It is the
// certificate go-tdx-guest trusts by default; passing it explicitly keeps
// the trust decision here and the library from logging about its default.
//
//go:embed intel_sgx_root_ca.pem
var intelRootPEM []byte

// intelRootSHA256 pins intelRootPEM.
const intelRootSHA256 = "44a0196b2b99f889b8e149e95b807a350e7424964399e885a7cbb8ccfab674d3"

// intelRoots returns a pool with Intel's SGX Root CA alone.
func intelRoots() (*x509.CertPool, error) {
	block, _ := pem.Decode(intelRootPEM)
	if block == nil {
		return nil, errors.New("the embedded Intel root is not PEM")
	}
	if sum := sha256.Sum256(block.Bytes); hex.EncodeToString(sum[:]) != intelRootSHA256 {
		return nil, errors.New("the embedded Intel root is not Intel's SGX Root CA")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, nil
}

// snpRoot is one SEV-SNP root of trust: an ARK with the ASK (and for AMD,
// the ASVK) it certified, for one product line.
type snpRoot struct {
	line  string
	certs *trust.AMDRootCerts
	kind  Root
}

// amdRoots returns AMD's roots as go-sev-guest embeds them, the VCEK and
// VLEK signing keys of each product line under its ARK.
func amdRoots() (map[string]snpRoot, error) {
	bundles := []struct {
		line       string
		vcek, vlek []byte
	}{
		{"Milan", trust.AskArkMilanVcekBytes, trust.AskArkMilanVlekBytes},
		{"Genoa", trust.AskArkGenoaVcekBytes, trust.AskArkGenoaVlekBytes},
		{"Turin", trust.AskArkTurinVcekBytes, trust.AskArkTurinVlekBytes},
	}
	roots := map[string]snpRoot{}
	for _, b := range bundles {
		// Some bundles end with blank lines, which the parser refuses.
		r := trust.AMDRootCertsProduct(b.line)
		if err := r.FromKDSCertBytes(bytes.TrimSpace(b.vcek)); err != nil {
			return nil, fmt.Errorf("AMD %s VCEK roots: %w", b.line, err)
		}
		var vlek trust.ProductCerts
		if err := vlek.FromKDSCertBytes(bytes.TrimSpace(b.vlek)); err != nil {
			return nil, fmt.Errorf("AMD %s VLEK roots: %w", b.line, err)
		}
		if r.ProductCerts.Ask == nil || r.ProductCerts.Ark == nil || vlek.Asvk == nil || vlek.Ark == nil ||
			!bytes.Equal(vlek.Ark.Raw, r.ProductCerts.Ark.Raw) {
			return nil, fmt.Errorf("AMD %s roots are incomplete or disagree", b.line)
		}
		r.ProductCerts.Asvk = vlek.Asvk
		roots[b.line] = snpRoot{line: b.line, certs: r, kind: RootAMD}
	}
	return roots, nil
}

// labRoot reads a lab root in the form of labtee.SecretCertChain: the ASK
// and the ARK in PEM. The product line is the ASK's, "SEV-<line>".
func labRoot(certChain []byte) (*snpRoot, error) {
	var pc trust.ProductCerts
	if err := pc.FromKDSCertBytes(certChain); err != nil {
		return nil, err
	}
	if pc.Ask == nil || pc.Ark == nil {
		return nil, errors.New("want the ASK then the ARK")
	}
	if err := pc.Ark.CheckSignatureFrom(pc.Ark); err != nil {
		return nil, fmt.Errorf("the ARK is not self-signed: %w", err)
	}
	if err := pc.Ask.CheckSignatureFrom(pc.Ark); err != nil {
		return nil, fmt.Errorf("the ASK is not signed by the ARK: %w", err)
	}
	line, ok := strings.CutPrefix(pc.Ask.Subject.CommonName, "SEV-")
	if !ok || line == "" {
		return nil, fmt.Errorf("the ASK's common name %q names no product line", pc.Ask.Subject.CommonName)
	}
	r := trust.AMDRootCertsProduct(line)
	r.ProductCerts = &pc
	return &snpRoot{line: line, certs: r, kind: RootLab}, nil
}
