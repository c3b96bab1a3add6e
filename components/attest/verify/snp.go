package verify

import (
	"bytes"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	"github.com/google/go-sev-guest/validate"
	sevverify "github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
)

func (v *Verifier) verifySNP(req *Request, now time.Time) (*Result, error) {
	att, err := evidence.DecodeSNP(req.Evidence)
	if err != nil {
		return nil, fail(guard.ReasonQuoteInvalid, "decoding the SEV-SNP evidence: %w", err)
	}
	line, err := snpProductLine(att)
	if err != nil {
		return nil, fail(guard.ReasonQuoteInvalid, "%w", err)
	}
	root, err := v.verifySNPChain(att, line, req.Profile, now)
	if err != nil {
		return nil, err
	}
	report := att.GetReport()

	// The checks below are go-sev-guest's validation, run once per concern
	// so that each failure has its own reason. The base options allow
	// everything a policy may allow, so that each run fails only on what
	// it adds; they still check that the report agrees with its VCEK
	// certificate (TCB, chip ID) and that the committed firmware is not
	// newer than the current one.
	if err := validate.SnpAttestation(att, snpBase()); err != nil {
		return nil, rooted(fail(guard.ReasonQuoteInvalid, "the report disagrees with its certificate: %w", err), root)
	}
	opts := snpBase()
	opts.ReportData = req.Nonce[:]
	if err := validate.SnpAttestation(att, opts); err != nil {
		return nil, rooted(fail(guard.ReasonNonceMismatch, "REPORT_DATA is not the challenge's nonce"), root)
	}
	opts = snpBase()
	opts.GuestPolicy.Debug = false
	if err := validate.SnpAttestation(att, opts); err != nil {
		return nil, rooted(fail(guard.ReasonDebugPolicy, "the guest policy %#x allows debugging", report.GetPolicy()), root)
	}
	opts = snpBase()
	opts.MinimumTCB = kds.DecomposeTCBVersion(kds.TCBVersion(req.References.MinSNPTCB.Version()))
	if err := validate.SnpAttestation(att, opts); err != nil {
		got := evidence.SNPTCBFromVersion(report.GetReportedTcb())
		return nil, rooted(fail(guard.ReasonTCBOutOfDate, "REPORTED_TCB %s is below the minimum %s", got, req.References.MinSNPTCB), root)
	}
	got := measurement(report.GetMeasurement())
	if err := matchReferences(req.References.Measurements, v1alpha1.TEESEVSNP, got, now, func(ref Reference) bool {
		opts := snpBase()
		opts.Measurement, _ = hex.DecodeString(string(ref.Measurement[len("sha384:"):]))
		opts.HostData = ref.HostData
		return validate.SnpAttestation(att, opts) == nil
	}); err != nil {
		return nil, rooted(err, root)
	}

	res := &Result{
		TEE:         v1alpha1.TEESEVSNP,
		Measurement: got,
		HostData:    bytes.Clone(report.GetHostData()),
		SNPTCB:      evidence.SNPTCBFromVersion(report.GetReportedTcb()),
		Root:        root,
		Profile:     req.Profile,
		VerifiedAt:  now,
	}
	if chip := report.GetChipId(); !allZero(chip) {
		res.ChipID = bytes.Clone(chip)
	}
	return res, nil
}

// snpBase returns validation options that allow every guest policy and
// provisional firmware, and compare no field.
func snpBase() *validate.Options {
	return &validate.Options{
		GuestPolicy: abi.SnpPolicy{
			SMT:        true,
			MigrateMA:  true,
			Debug:      true,
			CXLAllowed: true,
		},
		PermitProvisionalFirmware: true,
	}
}

// verifySNPChain verifies the report's signature and its endorsement key's
// certificate chain against the roots the profile trusts, and returns the
// kind of root that verified it.
func (v *Verifier) verifySNPChain(att *spb.Attestation, line string, profile guard.Profile, now time.Time) (Root, error) {
	var roots []snpRoot
	if r, ok := v.amd[line]; ok {
		roots = append(roots, r)
	}
	labMatches := v.lab != nil && v.lab.line == line
	if profile == guard.ProfileLab && labMatches {
		roots = append(roots, *v.lab)
	}
	if len(roots) == 0 {
		return "", fail(guard.ReasonQuoteInvalid, "no trusted root for product line %q", line)
	}
	var errs []error
	for _, root := range roots {
		err := verifySNPAgainst(att, root, now)
		if err == nil {
			return root.kind, nil
		}
		errs = append(errs, fmt.Errorf("%s root: %w", root.kind, err))
	}
	if profile == guard.ProfileProduction && labMatches && verifySNPAgainst(att, *v.lab, now) == nil {
		return "", fail(guard.ReasonTestRootOfTrust, "the evidence chains to the lab root, which the production profile does not trust")
	}
	return "", fail(guard.ReasonQuoteInvalid, "the signature or certificate chain does not verify: %w", errors.Join(errs...))
}

// verifySNPAgainst verifies att against one root. The ARK and ASK in the
// evidence are not needed, since the root has its own; when present they
// must be the root's, so that the evidence holds no certificate that
// nothing checked.
func verifySNPAgainst(att *spb.Attestation, root snpRoot, now time.Time) error {
	chain, pc := att.GetCertificateChain(), root.certs.ProductCerts
	if ark := chain.GetArkCert(); len(ark) > 0 && !bytes.Equal(ark, pc.Ark.Raw) {
		return errors.New("the ARK in the evidence is not the root's")
	}
	if ask := chain.GetAskCert(); len(ask) > 0 && !sameCert(ask, pc.Ask) && !sameCert(ask, pc.Asvk) {
		return errors.New("the ASK in the evidence is not the root's")
	}
	return sevverify.SnpAttestation(att, &sevverify.Options{
		DisableCertFetching: true,
		Now:                 now,
		TrustedRoots:        map[string][]*trust.AMDRootCerts{root.line: {root.certs}},
	})
}

func sameCert(der []byte, cert *x509.Certificate) bool {
	return cert != nil && bytes.Equal(der, cert.Raw)
}

// snpProductLine returns the product line whose roots must verify the
// report: from the report's CPUID (version 3 and later), or else from the
// endorsement key certificate's product name, as go-sev-guest decides it.
func snpProductLine(att *spb.Attestation) (string, error) {
	report := att.GetReport()
	if fms := report.GetCpuid1EaxFms(); fms != 0 {
		return kds.ProductLineFromFms(fms), nil
	}
	info, err := abi.ParseSignerInfo(report.GetSignerInfo())
	if err != nil {
		return "", err
	}
	der := att.GetCertificateChain().GetVcekCert()
	if info.SigningKey == abi.VlekReportSigner {
		der = att.GetCertificateChain().GetVlekCert()
	}
	if len(der) == 0 {
		return "", fmt.Errorf("the evidence has no %v certificate", info.SigningKey)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return "", fmt.Errorf("the %v certificate: %w", info.SigningKey, err)
	}
	exts, err := kds.CertificateExtensions(cert, info.SigningKey)
	if err != nil {
		return "", fmt.Errorf("the %v certificate: %w", info.SigningKey, err)
	}
	product, err := kds.ParseProductName(exts.ProductName, info.SigningKey)
	if err != nil {
		return "", fmt.Errorf("the %v certificate: %w", info.SigningKey, err)
	}
	return kds.ProductLine(product), nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
