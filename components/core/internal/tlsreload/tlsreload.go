// Package tlsreload serves a TLS certificate from files and picks up new
// files without a restart, as when cert-manager or a Secret volume renews
// them.
package tlsreload

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Reloader holds the current certificate of a key pair on disk.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.RWMutex
	cert    *tls.Certificate
	certPEM []byte
	keyPEM  []byte
}

// New loads the key pair, failing if it cannot: a server must not start
// without a usable certificate. A nil logger discards.
func New(certFile, keyFile string, logger *slog.Logger) (*Reloader, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: logger}
	if _, err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// GetCertificate returns the current certificate; it fits
// tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, nil
}

// Reload reads both files and, when either changed, swaps in the new pair.
// It compares contents rather than modification times, which coarse
// clocks and symlink swaps make unreliable. On error the previous
// certificate stays in use. It reports whether the certificate changed.
func (r *Reloader) Reload() (bool, error) {
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return false, fmt.Errorf("reading TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return false, fmt.Errorf("reading TLS key: %w", err)
	}
	r.mu.RLock()
	same := bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM)
	r.mu.RUnlock()
	if same {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("loading TLS key pair %s, %s: %w", r.certFile, r.keyFile, err)
	}
	r.mu.Lock()
	r.cert, r.certPEM, r.keyPEM = &cert, certPEM, keyPEM
	r.mu.Unlock()
	return true, nil
}

// Run checks the files every interval until ctx is done, logging each
// reload and each failure. A half-written pair fails to load and is
// retried at the next tick.
func (r *Reloader) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			changed, err := r.Reload()
			switch {
			case err != nil:
				r.log.Error("TLS certificate reload failed; keeping the previous one", "err", err)
			case changed:
				r.log.Info("TLS certificate reloaded", "cert", r.certFile)
			}
		}
	}
}
