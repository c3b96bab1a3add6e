package evidence

import "fmt"

// SNPTCB is an SEV-SNP TCB_VERSION: the security patch levels (SPLs) of the
// platform's firmware and microcode. One TCB is at least another when every
// level is.
type SNPTCB struct {
	// BootLoader is the AMD-SP bootloader's SPL.
	BootLoader uint8
	// TEE is the AMD-SP operating system's SPL.
	TEE uint8
	// SNP is the SNP firmware's SPL.
	SNP uint8
	// Microcode is the CPU microcode's SPL.
	Microcode uint8
}

// SNPTCBFromVersion splits a TCB_VERSION into its levels. Bytes 2 to 5 are
// reserved and zero on the platforms the verifier supports.
func SNPTCBFromVersion(v uint64) SNPTCB {
	return SNPTCB{BootLoader: uint8(v), TEE: uint8(v >> 8), SNP: uint8(v >> 48), Microcode: uint8(v >> 56)}
}

// Version returns the TCB_VERSION of t.
func (t SNPTCB) Version() uint64 {
	return uint64(t.BootLoader) | uint64(t.TEE)<<8 | uint64(t.SNP)<<48 | uint64(t.Microcode)<<56
}

// String writes t as its four levels.
func (t SNPTCB) String() string {
	return fmt.Sprintf("bl=%d tee=%d snp=%d ucode=%d", t.BootLoader, t.TEE, t.SNP, t.Microcode)
}
