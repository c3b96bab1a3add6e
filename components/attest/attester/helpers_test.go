package attester

import (
	"sync"
	"testing"

	"github.com/xila-guard/xila-guard/components/attest/labtee"
)

var (
	labOnce  sync.Once
	labChain *labtee.Chain
	labErr   error
)

// chain is the lab chain of ../testdata/labchain/lab.
func chain(t testing.TB) *labtee.Chain {
	t.Helper()
	labOnce.Do(func() { labChain, labErr = labtee.ReadSecretDir("../testdata/labchain/lab") })
	if labErr != nil {
		t.Fatal(labErr)
	}
	return labChain
}
