// Package certs serves a TLS key pair from files and picks up renewed
// files without a restart, as when cert-manager or a Secret volume
// replaces them. It checks the files' modification times at most once per
// interval, during a TLS handshake, and reloads when either changed.
package certs

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// DefaultCheckInterval is how often, at most, a handshake looks at the files.
const DefaultCheckInterval = time.Second

// Reloader holds the current certificate of a key pair on disk. It is safe
// for concurrent use.
type Reloader struct {
	certFile, keyFile string
	interval          time.Duration
	log               *slog.Logger
	now               func() time.Time
	// OnReload, when set, is called after each reload attempt with its
	// error (nil on success); the webhook counts them in a metric.
	OnReload func(error)

	mu        sync.Mutex
	cert      *tls.Certificate
	certStamp stamp
	keyStamp  stamp
	checked   time.Time
}

// stamp identifies a version of a file.
type stamp struct {
	mod   time.Time
	size  int64
	inode uint64
}

// New loads the key pair, failing if it cannot: a server must not start
// without a usable certificate. A nil logger discards; interval <= 0 means
// DefaultCheckInterval.
func New(certFile, keyFile string, interval time.Duration, logger *slog.Logger) (*Reloader, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultCheckInterval
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, interval: interval, log: logger, now: time.Now}
	cs, ks, err := r.stamps()
	if err != nil {
		return nil, err
	}
	if err := r.load(cs, ks); err != nil {
		return nil, err
	}
	r.checked = r.now()
	return r, nil
}

// GetCertificate returns the current certificate, reloading it first when
// the files changed since the last check; it fits tls.Config.GetCertificate.
// A pair that fails to load (e.g. half written) leaves the previous one in
// use and is tried again at the next check.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= r.interval {
		r.checked = now
		cs, ks, err := r.stamps()
		if err == nil && (cs != r.certStamp || ks != r.keyStamp) {
			err = r.load(cs, ks)
			if err == nil {
				r.log.Info("TLS certificate reloaded", "cert", r.certFile)
			}
			if r.OnReload != nil {
				r.OnReload(err)
			}
		}
		if err != nil {
			r.log.Error("TLS certificate reload failed; keeping the previous one", "err", err)
		}
	}
	return r.cert, nil
}

// Certificate returns the certificate in use, without checking the files.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert
}

func (r *Reloader) stamps() (stamp, stamp, error) {
	cs, err := fileStamp(r.certFile)
	if err != nil {
		return stamp{}, stamp{}, fmt.Errorf("reading TLS certificate: %w", err)
	}
	ks, err := fileStamp(r.keyFile)
	if err != nil {
		return stamp{}, stamp{}, fmt.Errorf("reading TLS key: %w", err)
	}
	return cs, ks, nil
}

// load reads the pair; the caller holds mu or owns r.
func (r *Reloader) load(cs, ks stamp) error {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("loading TLS key pair %s, %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certStamp, r.keyStamp = &cert, cs, ks
	return nil
}

// fileStamp follows symlinks, so a Secret volume's swap of its ..data
// link shows as a change.
func fileStamp(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	st := stamp{mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		// A file replaced by rename keeps neither its inode nor, usually,
		// its time; the inode catches a same-second, same-size swap.
		st.inode = sys.Ino
	}
	return st, nil
}
