package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/xila-guard/xila-guard/components/webhook/internal/testcert"
)

func serial(t *testing.T, c *tls.Certificate) int64 {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.Int64()
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcert.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.WriteServing(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(certFile, keyFile, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r.now = func() time.Time { return now }
	var reloads []error
	r.OnReload = func(err error) { reloads = append(reloads, err) }
	get := func() int64 {
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return serial(t, c)
	}
	if got := get(); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}

	if _, _, err := ca.WriteServing(dir, 2); err != nil {
		t.Fatal(err)
	}
	if got := get(); got != 1 {
		t.Fatalf("reloaded before the check interval: serial %d", got)
	}
	now = now.Add(time.Minute)
	if got := get(); got != 2 {
		t.Fatalf("serial %d after renewal, want 2", got)
	}
	if len(reloads) != 1 || reloads[0] != nil {
		t.Fatalf("reloads %v, want one success", reloads)
	}

	// A half-written pair keeps the previous certificate.
	if err := os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\ngarbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if got := get(); got != 2 {
		t.Fatalf("serial %d after a broken write, want 2 kept", got)
	}
	if len(reloads) != 2 || reloads[1] == nil {
		t.Fatalf("reloads %v, want a failure recorded", reloads)
	}
	if _, _, err := ca.WriteServing(dir, 3); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if got := get(); got != 3 {
		t.Fatalf("serial %d after the fix, want 3", got)
	}
}

func TestNewFailsWithoutPair(t *testing.T) {
	if _, err := New("/nonexistent/tls.crt", "/nonexistent/tls.key", 0, nil); err == nil {
		t.Fatal("started without a certificate")
	}
}
