package attester

import (
	"context"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

// Evidence is what a backend produced.
type Evidence struct {
	// TEE is the kind of evidence: SEV-SNP or TDX.
	TEE v1alpha1.TEEType
	// Data is the report or quote in the format of package evidence.
	Data []byte
	// EPCSize is the size of the node's SGX enclave page cache in bytes,
	// as the backend states it beside the evidence; 0 when it states
	// none. No signature covers it: it is the attester's word, taken only
	// together with evidence that verifies.
	EPCSize int64
	// Devices are the GPUs the TEE holds, as the server stated them.
	Devices []v1alpha1.GPUDevice
}

// DeviceStater is a backend whose TEE holds GPUs it states with its
// evidence. The server binds them into the report data it asks the
// backend for (ReportDataOf), so that the report's signature covers them.
type DeviceStater interface {
	// Devices are the GPUs, without dra (CheckDevices).
	Devices() []v1alpha1.GPUDevice
}

// Backend produces evidence that carries the given report data.
type Backend interface {
	// Name says what the backend is, for logs and errors.
	Name() string
	// Evidence returns evidence whose report data is reportData. It may
	// block; it should return when ctx ends.
	Evidence(ctx context.Context, reportData [nonce.Size]byte) (*Evidence, error)
}
