package labtee

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"

	"github.com/xila-guard/xila-guard/components/attest/evidence"
)

// Validity of the certificates, as AMD issues them.
const (
	rootValidity = 25 * 365 * 24 * time.Hour
	vcekValidity = 7 * 365 * 24 * time.Hour
	// backdate keeps a chain valid on a verifier whose clock is a little
	// behind the installer's.
	backdate = time.Hour
)

// DefaultRSABits is the size of the ARK and ASK keys, as AMD's.
const DefaultRSABits = 4096

// products are the product lines a lab chain can claim, with the CPUID
// family, model and stepping its reports carry and the product name of its
// VCEK certificate.
var products = map[string]struct {
	family, model, stepping byte
	name                    string
}{
	"Milan": {0x19, 0x01, 1, "Milan-B1"},
	"Genoa": {0x19, 0x11, 1, "Genoa-B1"},
}

// Options choose what a new chain claims.
type Options struct {
	// ProductLine is Milan (the default) or Genoa.
	ProductLine string
	// TCB is the platform TCB the VCEK is endorsed for and the reports
	// state. Each level but Microcode must be at most 127.
	TCB evidence.SNPTCB
	// ChipID is the chip's identity, in the VCEK certificate and every
	// report; random when zero.
	ChipID [abi.ChipIDSize]byte
	// Now is when the certificates become valid, less an hour; the current
	// time when zero.
	Now time.Time
	// RSABits is the size of the ARK and ASK keys; DefaultRSABits when zero.
	RSABits int
}

// Chain is a lab endorsement chain: a root (ARK), a signing key (ASK) and a
// chip's endorsement key (VCEK) for one TCB, with the private keys the
// software TEE needs.
type Chain struct {
	// ProductLine is the product line the chain claims, e.g. Milan.
	ProductLine string
	// ChipID is the chip identity in the VCEK certificate.
	ChipID [abi.ChipIDSize]byte
	// TCB is the TCB the VCEK is endorsed for.
	TCB evidence.SNPTCB
	// ARK, ASK and VCEK are the certificates.
	ARK, ASK, VCEK *x509.Certificate

	askKey  *rsa.PrivateKey // nil when the chain was read without it
	vcekKey *ecdsa.PrivateKey
}

// New generates a chain.
func New(opts Options) (*Chain, error) {
	if opts.ProductLine == "" {
		opts.ProductLine = "Milan"
	}
	if _, ok := products[opts.ProductLine]; !ok {
		return nil, fmt.Errorf("unsupported product line %q", opts.ProductLine)
	}
	if err := checkTCB(opts.TCB); err != nil {
		return nil, err
	}
	if opts.ChipID == ([abi.ChipIDSize]byte{}) {
		rand.Read(opts.ChipID[:])
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.RSABits == 0 {
		opts.RSABits = DefaultRSABits
	}
	arkKey, err := rsa.GenerateKey(rand.Reader, opts.RSABits)
	if err != nil {
		return nil, fmt.Errorf("generating the ARK key: %w", err)
	}
	askKey, err := rsa.GenerateKey(rand.Reader, opts.RSABits)
	if err != nil {
		return nil, fmt.Errorf("generating the ASK key: %w", err)
	}
	notBefore := opts.Now.Add(-backdate)
	ark, err := issue(&x509.Certificate{
		Subject:               amdName("ARK-" + opts.ProductLine),
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(rootValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
	}, nil, arkKey.Public(), arkKey)
	if err != nil {
		return nil, fmt.Errorf("issuing the ARK certificate: %w", err)
	}
	ask, err := issue(&x509.Certificate{
		Subject:               amdName("SEV-" + opts.ProductLine),
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(rootValidity),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}, ark, askKey.Public(), arkKey)
	if err != nil {
		return nil, fmt.Errorf("issuing the ASK certificate: %w", err)
	}
	vcekKey, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the VCEK key: %w", err)
	}
	c := &Chain{
		ProductLine: opts.ProductLine,
		ChipID:      opts.ChipID,
		ARK:         ark,
		ASK:         ask,
		askKey:      askKey,
		vcekKey:     vcekKey,
	}
	if err := c.endorse(opts.TCB, opts.Now); err != nil {
		return nil, err
	}
	return c, nil
}

// AtTCB returns a copy of the chain whose VCEK is endorsed for another TCB,
// as after a firmware update or rollback, valid from now. It needs the ASK
// key.
func (c *Chain) AtTCB(tcb evidence.SNPTCB, now time.Time) (*Chain, error) {
	if err := checkTCB(tcb); err != nil {
		return nil, err
	}
	next := *c
	if err := next.endorse(tcb, now); err != nil {
		return nil, err
	}
	return &next, nil
}

// endorse issues the VCEK certificate for tcb, as AMD's key distribution
// service does for a chip at a TCB.
func (c *Chain) endorse(tcb evidence.SNPTCB, now time.Time) error {
	if c.askKey == nil {
		return errors.New("the chain has no ASK key to endorse a VCEK with")
	}
	notBefore := now.Add(-backdate)
	vcek, err := issue(&x509.Certificate{
		Subject:         amdName("SEV-VCEK"),
		NotBefore:       notBefore,
		NotAfter:        notBefore.Add(vcekValidity),
		ExtraExtensions: vcekExtensions(products[c.ProductLine].name, tcb, c.ChipID),
	}, c.ASK, c.vcekKey.Public(), c.askKey)
	if err != nil {
		return fmt.Errorf("issuing the VCEK certificate: %w", err)
	}
	c.VCEK, c.TCB = vcek, tcb
	return nil
}

// issue signs template with RSASSA-PSS and SHA-384, as AMD signs every
// certificate of the chain, and parses the result. A nil parent
// self-signs.
func issue(template, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	template.SerialNumber = serial.Add(serial, big.NewInt(1))
	template.SignatureAlgorithm = x509.SHA384WithRSAPSS
	if parent == nil {
		parent = template
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// amdName is the subject AMD gives every certificate of an SEV chain; the
// verifier checks the location fields and the common names.
func amdName(commonName string) pkix.Name {
	return pkix.Name{
		Country:            []string{"US"},
		Province:           []string{"CA"},
		Locality:           []string{"Santa Clara"},
		Organization:       []string{"Advanced Micro Devices"},
		OrganizationalUnit: []string{"Engineering"},
		CommonName:         commonName,
	}
}

// vcekExtensions are the extensions of AMD's key distribution service
// specification: the structure version, the product name, one integer per
// security patch level and the chip's hardware ID, which AMD writes as raw
// bytes.
func vcekExtensions(productName string, tcb evidence.SNPTCB, chipID [abi.ChipIDSize]byte) []pkix.Extension {
	integer := func(v uint8) []byte {
		b, _ := asn1.Marshal(int(v))
		return b
	}
	name, _ := asn1.MarshalWithParams(productName, "ia5")
	return []pkix.Extension{
		{Id: kds.OidStructVersion, Value: integer(0)},
		{Id: kds.OidProductName1, Value: name},
		{Id: kds.OidBlSpl, Value: integer(tcb.BootLoader)},
		{Id: kds.OidTeeSpl, Value: integer(tcb.TEE)},
		{Id: kds.OidSpl4, Value: integer(0)},
		{Id: kds.OidSpl5, Value: integer(0)},
		{Id: kds.OidSpl6, Value: integer(0)},
		{Id: kds.OidSpl7, Value: integer(0)},
		{Id: kds.OidSnpSpl, Value: integer(tcb.SNP)},
		{Id: kds.OidUcodeSpl, Value: integer(tcb.Microcode)},
		{Id: kds.OidHwid, Value: chipID[:]},
	}
}

// checkTCB refuses levels that a TCB_VERSION cannot carry.
func checkTCB(tcb evidence.SNPTCB) error {
	for name, v := range map[string]uint8{"BootLoader": tcb.BootLoader, "TEE": tcb.TEE, "SNP": tcb.SNP} {
		if v > 127 {
			return fmt.Errorf("TCB level %s is %d, at most 127", name, v)
		}
	}
	return nil
}
