package controller

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/verify"
)

// ReferenceSource gives the reference values evidence is appraised
// against. An error refuses to appraise: the node's evidence is not
// refreshed and grows stale.
type ReferenceSource interface {
	References() (verify.References, error)
}

// StaticReferences are fixed reference values.
type StaticReferences verify.References

// References implements ReferenceSource.
func (s StaticReferences) References() (verify.References, error) { return verify.References(s), nil }

// ReferenceValues is the reference values file, YAML or JSON:
//
//	measurements:
//	- tee: SEV-SNP
//	  measurement: sha384:<96 hex digits>
//	  hostData: <64 hex digits>          # optional
//	  notAfter: "2027-01-01T00:00:00Z"   # optional
//	minSNPTCB: {bootLoader: 3, tee: 0, snp: 8, microcode: 115}
//	minTDXTCBSVN: <32 hex digits>
type ReferenceValues struct {
	// Measurements are the allowed launch measurements; none allows none.
	Measurements []MeasurementReference `json:"measurements"`
	// MinSNPTCB is the lowest SEV-SNP REPORTED_TCB accepted.
	MinSNPTCB *v1alpha1.SNPTCB `json:"minSNPTCB,omitempty"`
	// MinTDXTCBSVN is the lowest TDX TEE_TCB_SVN accepted, in hex.
	MinTDXTCBSVN string `json:"minTDXTCBSVN,omitempty"`
}

// MeasurementReference is one allowed launch measurement.
type MeasurementReference struct {
	// TEE is SEV-SNP or TDX.
	TEE v1alpha1.TEEType `json:"tee"`
	// Measurement is the SEV-SNP MEASUREMENT or TDX MRTD, sha384:<hex>.
	Measurement v1alpha1.Measurement `json:"measurement"`
	// HostData, in hex, must equal the SEV-SNP HOST_DATA (32 bytes) or TDX
	// MRCONFIGID (48 bytes) too when set.
	HostData string `json:"hostData,omitempty"`
	// NotAfter is the last instant the reference allows the measurement.
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
}

// ParseReferenceValues reads a reference values file strictly: unknown
// and duplicate fields are refused, and so is every malformed value.
func ParseReferenceValues(data []byte) (verify.References, error) {
	var rv ReferenceValues
	if err := yaml.UnmarshalStrict(data, &rv); err != nil {
		return verify.References{}, err
	}
	var refs verify.References
	var errs []error
	for i, m := range rv.Measurements {
		ref, err := m.reference()
		if err != nil {
			errs = append(errs, fmt.Errorf("measurements[%d]: %w", i, err))
			continue
		}
		refs.Measurements = append(refs.Measurements, ref)
	}
	if t := rv.MinSNPTCB; t != nil {
		levels := []int32{t.BootLoader, t.TEE, t.SNP, t.Microcode}
		for i, v := range levels {
			if v < 0 || v > 255 {
				errs = append(errs, fmt.Errorf("minSNPTCB.%s is %d, want 0 to 255", [...]string{"bootLoader", "tee", "snp", "microcode"}[i], v))
			}
		}
		refs.MinSNPTCB = evidence.SNPTCB{BootLoader: uint8(t.BootLoader), TEE: uint8(t.TEE), SNP: uint8(t.SNP), Microcode: uint8(t.Microcode)}
	}
	if rv.MinTDXTCBSVN != "" {
		b, err := hex.DecodeString(rv.MinTDXTCBSVN)
		if err != nil || len(b) != verify.TDXTCBSVNSize {
			errs = append(errs, fmt.Errorf("minTDXTCBSVN %q is not %d hex digits", rv.MinTDXTCBSVN, 2*verify.TDXTCBSVNSize))
		}
		refs.MinTDXTCBSVN = b
	}
	return refs, errors.Join(errs...)
}

func (m *MeasurementReference) reference() (verify.Reference, error) {
	ref := verify.Reference{TEE: m.TEE, Measurement: m.Measurement}
	size := 0
	switch m.TEE {
	case v1alpha1.TEESEVSNP:
		size = verify.SNPHostDataSize
	case v1alpha1.TEETDX:
		size = verify.TDXConfigIDSize
	default:
		return ref, fmt.Errorf("tee %q: want %s or %s", m.TEE, v1alpha1.TEESEVSNP, v1alpha1.TEETDX)
	}
	if !v1alpha1.IsMeasurement(m.Measurement) || len(m.Measurement) != len("sha384:")+2*verify.MeasurementSize {
		return ref, fmt.Errorf("measurement %q is not sha384:<96 lowercase hex digits>", m.Measurement)
	}
	if m.HostData != "" {
		b, err := hex.DecodeString(m.HostData)
		if err != nil || len(b) != size {
			return ref, fmt.Errorf("hostData %q is not %d hex digits", m.HostData, 2*size)
		}
		ref.HostData = b
	}
	if m.NotAfter != nil {
		ref.NotAfter = m.NotAfter.Time
	}
	return ref, nil
}

// ReferenceFile reads reference values from a file, a mounted ConfigMap
// key for instance, and reads it again whenever it changes. A file that
// cannot be read or parsed is an error until it is fixed: the controller
// never appraises against values it could not read.
type ReferenceFile struct {
	// Path is the file.
	Path string

	mu      sync.Mutex
	stamp   fileStamp
	refs    verify.References
	err     error
	content []byte
}

type fileStamp struct {
	modTime time.Time
	size    int64
}

// References implements ReferenceSource.
func (f *ReferenceFile) References() (verify.References, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := os.Stat(f.Path)
	if err != nil {
		return verify.References{}, fmt.Errorf("reference values: %w", err)
	}
	stamp := fileStamp{info.ModTime(), info.Size()}
	if stamp == f.stamp && f.content != nil {
		return f.refs, f.err
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return verify.References{}, fmt.Errorf("reference values: %w", err)
	}
	if !bytes.Equal(data, f.content) || f.content == nil {
		f.refs, f.err = ParseReferenceValues(data)
		if f.err != nil {
			f.err = fmt.Errorf("reference values %s: %w", f.Path, f.err)
		}
	}
	f.stamp, f.content = stamp, data
	return f.refs, f.err
}
