package attester

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/go-sev-guest/abi"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

// Lab is the lab's software TEE: it signs SEV-SNP reports with a lab chain
// and states the measurement, host data and guest policy it is configured
// with. Its evidence proves that the pieces work together, never
// isolation: whoever holds the chain's keys can sign any report.
type Lab struct {
	// Chain signs the reports; labtee.ReadSecretDir reads it from a
	// mounted Secret.
	Chain *labtee.Chain
	// Measurement is the launch measurement the reports state.
	Measurement [abi.MeasurementSize]byte
	// HostData is the HOST_DATA the reports state.
	HostData [abi.HostDataSize]byte
	// Policy is the guest policy; labtee.DefaultPolicy when zero.
	Policy uint64
	// GuestSVN is the guest's security version number.
	GuestSVN uint32
	// EPCSize is the SGX enclave page cache size in bytes the lab states
	// beside its reports (Evidence.EPCSize); 0 for none.
	EPCSize int64
	// GPUs are the GPUs the lab TEE states it holds, bound into each
	// report; none when empty.
	GPUs []v1alpha1.GPUDevice
}

var (
	_ Backend      = (*Lab)(nil)
	_ DeviceStater = (*Lab)(nil)
)

// Devices implements DeviceStater.
func (l *Lab) Devices() []v1alpha1.GPUDevice { return l.GPUs }

// Name implements Backend.
func (l *Lab) Name() string { return "lab" }

// Evidence implements Backend.
func (l *Lab) Evidence(ctx context.Context, reportData [nonce.Size]byte) (*Evidence, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := l.Chain.Sign(labtee.Report{
		Measurement: l.Measurement,
		HostData:    l.HostData,
		ReportData:  reportData,
		Policy:      l.Policy,
		GuestSVN:    l.GuestSVN,
	})
	if err != nil {
		return nil, fmt.Errorf("signing a lab report: %w", err)
	}
	return &Evidence{TEE: v1alpha1.TEESEVSNP, Data: data, EPCSize: l.EPCSize}, nil
}

// ParseMeasurement reads a launch measurement written as sha384:<96 hex
// digits>, the form of NodeSecurityState and PlacementPolicy, or as the
// bare hex digits.
func ParseMeasurement(s string) ([abi.MeasurementSize]byte, error) {
	var out [abi.MeasurementSize]byte
	digest := strings.TrimPrefix(s, "sha384:")
	b, err := hex.DecodeString(digest)
	if err != nil || len(b) != len(out) {
		return out, fmt.Errorf("measurement %q is not sha384:<%d hex digits>", s, 2*len(out))
	}
	copy(out[:], b)
	return out, nil
}

// ParseHostData reads SEV-SNP HOST_DATA written as 64 hex digits; empty
// is all zeroes.
func ParseHostData(s string) ([abi.HostDataSize]byte, error) {
	var out [abi.HostDataSize]byte
	if s == "" {
		return out, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(out) {
		return out, fmt.Errorf("host data %q is not %d hex digits", s, 2*len(out))
	}
	copy(out[:], b)
	return out, nil
}
