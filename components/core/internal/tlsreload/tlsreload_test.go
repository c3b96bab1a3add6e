package tlsreload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/core/internal/testcert"
)

func serial(t *testing.T, r *Reloader) int64 {
	t.Helper()
	c, err := r.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.Int64()
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testcert.Write(t, dir, 1)
	r, err := New(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(t, r); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}
	if changed, err := r.Reload(); changed || err != nil {
		t.Errorf("Reload() of unchanged files = %v, %v; want false, nil", changed, err)
	}

	testcert.Write(t, dir, 2)
	if changed, err := r.Reload(); !changed || err != nil {
		t.Errorf("Reload() of new files = %v, %v; want true, nil", changed, err)
	}
	if got := serial(t, r); got != 2 {
		t.Errorf("serial %d after reload, want 2", got)
	}

	// A broken pair is refused and the previous certificate stays.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(); changed || err == nil {
		t.Errorf("Reload() of a broken pair = %v, %v; want false and an error", changed, err)
	}
	if got := serial(t, r); got != 2 {
		t.Errorf("serial %d after a failed reload, want 2", got)
	}
}

func TestRunPicksUpChanges(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testcert.Write(t, dir, 1)
	r, err := New(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx, 10*time.Millisecond)
	testcert.Write(t, dir, 3)
	deadline := time.Now().Add(5 * time.Second)
	for serial(t, r) != 3 {
		if time.Now().After(deadline) {
			t.Fatal("the new certificate was not picked up within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNewFails(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testcert.Write(t, dir, 1)
	missing := filepath.Join(dir, "missing")
	for name, files := range map[string][2]string{
		"missing certificate": {missing, keyFile},
		"missing key":         {certFile, missing},
		"key is not a key":    {certFile, certFile},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(files[0], files[1], nil); err == nil {
				t.Error("New() succeeded")
			}
		})
	}
}
