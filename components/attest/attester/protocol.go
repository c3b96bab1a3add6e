package attester

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

// Path is where the attester answers challenges (POST, JSON).
const Path = "/v1/evidence"

// Limits of the protocol.
const (
	// MaxRequestBytes bounds a request body; a valid one is a few hundred
	// bytes.
	MaxRequestBytes = 4 << 10
	// MaxResponseBytes bounds a response body: SEV-SNP evidence with its
	// certificates is about 5 KiB and a TDX quote about 8 KiB, and base64
	// adds a third.
	MaxResponseBytes = 256 << 10
	// MinChallengeSize and MaxChallengeSize bound a challenge;
	// nonce.NewChallenge makes nonce.ChallengeSize bytes.
	MinChallengeSize = 16
	MaxChallengeSize = 64
	// maxIdentityLen bounds the node UID and the incarnation, as the
	// NodeSecurityState does.
	maxIdentityLen = 128
)

// Request asks for evidence. It carries either the node's UID, its
// incarnation and the challenge, from which the attester computes the
// report data with nonce.For, or the report data itself; not both.
// Byte fields are base64 in JSON.
type Request struct {
	// NodeUID is the UID of the Node object the evidence is for.
	NodeUID string `json:"nodeUID,omitempty"`
	// Incarnation is the node's evidence incarnation.
	Incarnation string `json:"incarnation,omitempty"`
	// Challenge is the controller's fresh random challenge.
	Challenge []byte `json:"challenge,omitempty"`
	// ReportData is the 64 bytes the evidence must carry, instead of the
	// three fields above.
	ReportData []byte `json:"reportData,omitempty"`
}

// Response is the evidence that answers a Request.
type Response struct {
	// TEE is the kind of evidence: SEV-SNP or TDX.
	TEE v1alpha1.TEEType `json:"tee"`
	// Evidence is the report or quote in the format of package evidence.
	Evidence []byte `json:"evidence"`
	// EPCSize is the size of the node's SGX enclave page cache in bytes,
	// stated beside the evidence and covered by no signature; left out
	// when the attester states none.
	EPCSize int64 `json:"epcSize,omitempty"`
	// Devices are the GPUs the TEE holds, each by its UUID (id) with its
	// model, MIG facts and CC mode, and without dra: the controller names
	// the DRA device of each from the node's ResourceSlices. The report's
	// signature covers them: its report data is then
	// nonce.ForDevices over EncodeDevices(Devices). Left out when the
	// attester states none, or answers a request that gives reportData.
	Devices []v1alpha1.GPUDevice `json:"devices,omitempty"`
}

// MaxDevices is the most GPUs an answer may state, as many as a
// NodeSecurityState lists.
const MaxDevices = 64

// EncodeDevices is the encoding of the devices that the report data
// binds: their JSON, in the order given.
func EncodeDevices(devices []v1alpha1.GPUDevice) ([]byte, error) {
	return json.Marshal(devices)
}

// CheckDevices says what is wrong with the devices an attester states.
func CheckDevices(devices []v1alpha1.GPUDevice) error {
	if len(devices) > MaxDevices {
		return fmt.Errorf("%d devices, more than %d", len(devices), MaxDevices)
	}
	seen := map[string]bool{}
	for i, d := range devices {
		switch {
		case d.ID == "":
			return fmt.Errorf("device %d has no id", i)
		case seen[d.ID]:
			return fmt.Errorf("device %s is stated twice", d.ID)
		case d.DRA != nil:
			return fmt.Errorf("device %s names a DRA device, which only the controller names", d.ID)
		}
		seen[d.ID] = true
	}
	return nil
}

// ErrorResponse is the body of every answer but 200.
type ErrorResponse struct {
	// Message says what was wrong.
	Message string `json:"message"`
}

// ReportDataOf returns the report data a request asks for, of evidence
// that states devices, or says why the request is malformed. A request
// that gives the report data itself takes no devices.
func ReportDataOf(r *Request, devices []v1alpha1.GPUDevice) ([nonce.Size]byte, error) {
	var out [nonce.Size]byte
	parts := r.NodeUID != "" || r.Incarnation != "" || len(r.Challenge) > 0
	switch {
	case len(r.ReportData) > 0 && parts:
		return out, errors.New("give either reportData or nodeUID, incarnation and challenge, not both")
	case len(r.ReportData) > 0 && len(devices) > 0:
		return out, errors.New("a request that gives reportData takes no devices")
	case len(r.ReportData) > 0:
		if len(r.ReportData) != nonce.Size {
			return out, fmt.Errorf("reportData is %d bytes, want %d", len(r.ReportData), nonce.Size)
		}
		copy(out[:], r.ReportData)
		return out, nil
	}
	var errs []error
	for _, f := range [...]struct{ name, v string }{{"nodeUID", r.NodeUID}, {"incarnation", r.Incarnation}} {
		switch name, v := f.name, f.v; {
		case v == "":
			errs = append(errs, fmt.Errorf("%s is required", name))
		case len(v) > maxIdentityLen:
			errs = append(errs, fmt.Errorf("%s is longer than %d bytes", name, maxIdentityLen))
		}
	}
	if n := len(r.Challenge); n < MinChallengeSize || n > MaxChallengeSize {
		errs = append(errs, fmt.Errorf("challenge is %d bytes, want %d to %d", n, MinChallengeSize, MaxChallengeSize))
	}
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	if len(devices) == 0 {
		return nonce.For(r.NodeUID, r.Incarnation, r.Challenge), nil
	}
	if err := CheckDevices(devices); err != nil {
		return out, err
	}
	enc, err := EncodeDevices(devices)
	if err != nil {
		return out, err
	}
	return nonce.ForDevices(r.NodeUID, r.Incarnation, r.Challenge, enc), nil
}
