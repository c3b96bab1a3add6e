package labtee

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha512"
	"fmt"

	"github.com/google/go-sev-guest/abi"
	spb "github.com/google/go-sev-guest/proto/sevsnp"

	"github.com/xila-guard/xila-guard/components/attest/evidence"
)

// Guest policy bits (SEV-SNP ABI, GUEST_POLICY).
const (
	// PolicyReserved must always be set.
	PolicyReserved uint64 = 1 << 17
	// PolicySMT allows simultaneous multithreading.
	PolicySMT uint64 = 1 << 16
	// PolicyDebug lets the host debug the guest, and so read its memory.
	PolicyDebug uint64 = 1 << 19
	// DefaultPolicy is what a production guest runs with: SMT allowed, no
	// debugging, no migration agent.
	DefaultPolicy = PolicyReserved | PolicySMT
)

// The firmware version lab reports state, current and committed alike.
const (
	firmwareMajor = 1
	firmwareMinor = 55
	firmwareBuild = 21
)

// Report is what the software TEE puts in a report besides the chain's
// product, chip ID and TCB.
type Report struct {
	// Measurement is the launch measurement (MEASUREMENT).
	Measurement [abi.MeasurementSize]byte
	// HostData is the data the host supplied at launch (HOST_DATA).
	HostData [abi.HostDataSize]byte
	// ReportData is what the guest asked the report to carry (REPORT_DATA),
	// the challenge's nonce.
	ReportData [abi.ReportDataSize]byte
	// Policy is the guest policy; DefaultPolicy when zero.
	Policy uint64
	// GuestSVN is the guest's security version number.
	GuestSVN uint32
	// VMPL is the privilege level that asked for the report, 0 to 3.
	VMPL uint32
}

// Sign returns the SEV-SNP evidence a guest with this chip would send: a
// version 3 report signed with the VCEK key, followed by the certificate
// table with the ARK, ASK and VCEK certificates (evidence.EncodeSNP).
func (c *Chain) Sign(r Report) ([]byte, error) {
	if r.Policy == 0 {
		r.Policy = DefaultPolicy
	}
	if _, err := abi.ParseSnpPolicy(r.Policy); err != nil {
		return nil, fmt.Errorf("invalid guest policy %#x: %w", r.Policy, err)
	}
	product := products[c.ProductLine]
	tcb := c.TCB.Version()
	reportID := make([]byte, abi.ReportIDSize)
	rand.Read(reportID)
	noMigrationAgent := make([]byte, abi.ReportIDMASize)
	for i := range noMigrationAgent {
		noMigrationAgent[i] = 0xff
	}
	raw, err := abi.ReportToAbiBytes(&spb.Report{
		Version:         abi.ReportVersion3,
		GuestSvn:        r.GuestSVN,
		Policy:          r.Policy,
		FamilyId:        make([]byte, abi.FamilyIDSize),
		ImageId:         make([]byte, abi.ImageIDSize),
		Vmpl:            r.VMPL,
		SignatureAlgo:   abi.SignEcdsaP384Sha384,
		CurrentTcb:      tcb,
		PlatformInfo:    1, // SMT enabled
		SignerInfo:      abi.ComposeSignerInfo(abi.SignerInfo{SigningKey: abi.VcekReportSigner}),
		ReportData:      r.ReportData[:],
		Measurement:     r.Measurement[:],
		HostData:        r.HostData[:],
		IdKeyDigest:     make([]byte, abi.IDKeyDigestSize),
		AuthorKeyDigest: make([]byte, abi.AuthorKeyDigestSize),
		ReportId:        reportID,
		ReportIdMa:      noMigrationAgent,
		ReportedTcb:     tcb,
		Cpuid1EaxFms:    abi.FmsToCpuid1Eax(product.family, product.model, product.stepping),
		ChipId:          c.ChipID[:],
		CommittedTcb:    tcb,
		CurrentBuild:    firmwareBuild,
		CurrentMinor:    firmwareMinor,
		CurrentMajor:    firmwareMajor,
		CommittedBuild:  firmwareBuild,
		CommittedMinor:  firmwareMinor,
		CommittedMajor:  firmwareMajor,
		LaunchTcb:       tcb,
		Signature:       make([]byte, abi.SignatureSize),
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the report: %w", err)
	}
	// The signature covers every byte before it, hashed with SHA-384.
	digest := sha512.Sum384(abi.SignedComponent(raw))
	rs, ss, err := ecdsa.Sign(rand.Reader, c.vcekKey, digest[:])
	if err != nil {
		return nil, fmt.Errorf("signing the report: %w", err)
	}
	if err := abi.SetSignature(rs, ss, raw); err != nil {
		return nil, err
	}
	return evidence.EncodeSNP(raw, evidence.SNPCerts{ARK: c.ARK.Raw, ASK: c.ASK.Raw, VCEK: c.VCEK.Raw})
}
