package attester

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/google/go-configfs-tsm/configfs/configfsi"
	"github.com/google/go-configfs-tsm/report"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/evidence"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
)

// Providers the kernel names in a configfs-tsm report's provider
// attribute.
const (
	// ProviderSEVGuest is the SEV-SNP guest driver (sev-guest).
	ProviderSEVGuest = "sev_guest"
	// ProviderTDXGuest is the TDX guest driver (tdx-guest).
	ProviderTDXGuest = "tdx_guest"
)

// TSM asks the kernel's configfs-tsm report interface for evidence: an
// SEV-SNP attestation report with the certificate table the host supplies,
// or a TDX quote. It needs /sys/kernel/config mounted, and a guest kernel
// with the sev-guest or tdx-guest driver.
type TSM struct {
	// Client reaches configfs; linuxtsm.MakeClient for the real one.
	Client configfsi.Client
	// Privilege is the privilege level (SEV-SNP VMPL) to ask the report
	// at; the kernel's default when nil.
	Privilege *uint

	// busy serialises requests: the guest driver serves one at a time,
	// and a request that outlived its caller still holds it.
	busy sync.Mutex
}

var _ Backend = (*TSM)(nil)

// Name implements Backend.
func (t *TSM) Name() string { return "configfs-tsm" }

// Evidence implements Backend. A report request cannot be interrupted, so
// it runs to its end even when ctx ends first; the caller has its answer
// (ctx's error) by then.
func (t *TSM) Evidence(ctx context.Context, reportData [nonce.Size]byte) (*Evidence, error) {
	type answer struct {
		ev  *Evidence
		err error
	}
	done := make(chan answer, 1)
	go func() {
		t.busy.Lock()
		defer t.busy.Unlock()
		if ctx.Err() != nil {
			done <- answer{nil, ctx.Err()}
			return
		}
		ev, err := t.evidence(reportData)
		done <- answer{ev, err}
	}()
	select {
	case a := <-done:
		return a.ev, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (t *TSM) evidence(reportData [nonce.Size]byte) (ev *Evidence, err error) {
	r, err := report.CreateOpenReport(t.Client)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.Destroy()) }()
	if err := r.WriteOption("inblob", reportData[:]); err != nil {
		return nil, err
	}
	if t.Privilege != nil {
		if err := r.WriteOption("privlevel", []byte(strconv.FormatUint(uint64(*t.Privilege), 10))); err != nil {
			return nil, err
		}
	}
	// The provider says which evidence the report is, and so whether it
	// comes with a certificate table. Reading it does not make the report;
	// reading auxblob or outblob does, once per generation, and ReadOption
	// refuses an attribute from another generation than the inputs'.
	p, err := r.ReadOption("provider")
	if err != nil {
		return nil, err
	}
	switch provider := strings.TrimSpace(string(p)); provider {
	case ProviderTDXGuest:
		quote, err := r.ReadOption("outblob")
		if err != nil {
			return nil, err
		}
		return &Evidence{TEE: v1alpha1.TEETDX, Data: quote}, nil
	case ProviderSEVGuest:
		table, err := r.ReadOption("auxblob")
		if err != nil {
			return nil, err
		}
		raw, err := r.ReadOption("outblob")
		if err != nil {
			return nil, err
		}
		// The guest driver returns the certificate table as the host
		// supplied it; the verifier takes it in canonical form.
		data, err := evidence.NormalizeSNP(raw, table)
		if err != nil {
			return nil, fmt.Errorf("the SEV-SNP report from configfs-tsm: %w", err)
		}
		return &Evidence{TEE: v1alpha1.TEESEVSNP, Data: data}, nil
	default:
		return nil, fmt.Errorf("configfs-tsm provider %q is neither %s nor %s", provider, ProviderSEVGuest, ProviderTDXGuest)
	}
}
