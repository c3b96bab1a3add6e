// Package app is the xila-guard-core command: flags, logging, the HTTP
// server and its lifecycle. main only calls Main.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/version"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/server"
)

// Main runs the command with the process's arguments until SIGTERM or
// SIGINT, and returns the exit code. It is the only place that knows about
// the process.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", guard.CoreServiceName, err)
		return 1
	}
}

// Run parses args and serves until ctx is done, then shuts down gracefully.
// Logs go to stderr as JSON; --version prints to stdout.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.version {
		_, err := fmt.Fprintf(stdout, "%s %s\n", guard.CoreServiceName, version.Get())
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.listen, err)
	}
	return serve(ctx, o, ln, logger)
}

// serve runs the server on ln until ctx is done.
func serve(ctx context.Context, o *options, ln net.Listener, logger *slog.Logger) error {
	ev, err := evaluate.New(evaluate.Options{Profile: guard.Profile(o.profile), ClockSkew: o.clockSkew})
	if err != nil {
		ln.Close()
		return err
	}
	srv, err := server.New(server.Config{
		Evaluator: ev, Logger: logger, MaxRequestBytes: o.maxRequestBytes, MaxNodes: o.maxNodes,
	})
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: o.readHeaderTimeout,
		ReadTimeout:       o.readTimeout,
		WriteTimeout:      o.writeTimeout,
		IdleTimeout:       o.idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	scheme := "http"
	if o.tlsCertFile != "" {
		// The certificate watcher logs through controller-runtime's logger.
		ctrllog.SetLogger(logr.FromSlogHandler(logger.Handler()))
		watcher, err := certwatcher.New(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			ln.Close()
			return fmt.Errorf("loading the serving certificate: %w", err)
		}
		watcher = watcher.WithWatchInterval(o.tlsReloadInterval)
		go func() {
			if err := watcher.Start(ctx); err != nil {
				logger.Error("watching the serving certificate failed; stopping", "err", err)
				cancel()
			}
		}()
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate}
		ln = tls.NewListener(ln, hs.TLSConfig)
		scheme = "https"
	}

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	srv.SetReady(true)
	logger.Info("serving", "addr", ln.Addr().String(), "scheme", scheme, "profile", ev.Profile(),
		"version", version.Get())

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	// Report not ready first, so that probes steer new traffic away while
	// the requests in flight finish.
	srv.SetReady(false)
	logger.Info("shutting down", "timeout", o.shutdownTimeout.String())
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownTimeout)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	logger.Info("stopped")
	return nil
}
