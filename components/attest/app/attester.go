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
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-configfs-tsm/configfs/linuxtsm"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	sigsjson "sigs.k8s.io/json"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/version"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
)

// Backends of the attester.
const (
	// BackendTSM asks the kernel's configfs-tsm report interface.
	BackendTSM = "tsm"
	// BackendLab signs with a lab chain.
	BackendLab = "lab"
)

// attesterOptions are the attester's flags.
type attesterOptions struct {
	listen            string
	backend           string
	tsmPrivilege      int
	labChainDir       string
	labMeasurement    string
	labNodeMeasures   map[string]string
	nodeName          string
	labHostData       string
	labPolicy         uint64
	labGuestSVN       uint
	labEPCSize        int64
	labNodeGPUs       map[string][]v1alpha1.GPUDevice
	reportTimeout     time.Duration
	tlsCertFile       string
	tlsKeyFile        string
	tlsReloadInterval time.Duration
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	shutdownTimeout   time.Duration
	logLevel          slog.Level
}

func parseAttesterFlags(args []string, stderr io.Writer) (*attesterOptions, error) {
	o := &attesterOptions{}
	fs := flag.NewFlagSet(Name+" attester", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", ":8443", "address to serve on")
	fs.StringVar(&o.backend, "backend", BackendTSM, "where evidence comes from: tsm (the kernel's configfs-tsm, on SEV-SNP or TDX guests) or lab (a lab chain)")
	fs.IntVar(&o.tsmPrivilege, "tsm-privilege-level", -1, "tsm: privilege level (SEV-SNP VMPL, 0 to 3) to ask reports at; -1 for the kernel's default")
	fs.StringVar(&o.labChainDir, "lab-chain-dir", "", "lab: directory of the mounted lab chain Secret (cert_chain.pem, vcek.pem, vcek-key.pem)")
	fs.StringVar(&o.labMeasurement, "lab-measurement", "", "lab: launch measurement the reports state, sha384:<96 hex digits>")
	fs.Func("lab-node-measurements", "lab: launch measurements of particular nodes, node=sha384:<96 hex digits>[,node=...]; the node named by --node-name states its own, the others --lab-measurement", func(v string) error {
		m, err := parseNodeMeasurements(v)
		o.labNodeMeasures = m
		return err
	})
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "the node this attester runs on (default $NODE_NAME), for --lab-node-measurements")
	fs.StringVar(&o.labHostData, "lab-host-data", "", "lab: HOST_DATA the reports state, 64 hex digits; zeroes when empty")
	fs.Uint64Var(&o.labPolicy, "lab-policy", labtee.DefaultPolicy, "lab: guest policy the reports state (bit 19 allows debugging)")
	fs.UintVar(&o.labGuestSVN, "lab-guest-svn", 0, "lab: guest security version number the reports state")
	fs.Int64Var(&o.labEPCSize, "lab-epc-size", 0, "lab: SGX enclave page cache size in bytes stated beside the reports (epcSize, e.g. 67108864); 0 states none")
	fs.Func("lab-node-gpus", `lab: GPUs the TEE of particular nodes states it holds, bound into each report, as JSON: {"node": [{"id": "GPU-<uuid>", "model": "...", "ccMode": "On"}, ...]}; the node named by --node-name states its own, the others none`, func(v string) error {
		m, err := parseNodeGPUs(v)
		o.labNodeGPUs = m
		return err
	})
	fs.DurationVar(&o.reportTimeout, "report-timeout", attester.DefaultReportTimeout, "bound on producing one piece of evidence, waiting for the TEE included")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "PEM certificate; with --tls-key-file serves HTTPS, reloading the pair when the files change")
	fs.StringVar(&o.tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.DurationVar(&o.tlsReloadInterval, "tls-reload-interval", 10*time.Second, "how often the TLS files are read again, besides when they change")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", 5*time.Second, "time allowed to read request headers")
	fs.DurationVar(&o.readTimeout, "read-timeout", 10*time.Second, "time allowed to read a whole request")
	fs.DurationVar(&o.writeTimeout, "write-timeout", 30*time.Second, "time allowed from the end of the headers to the end of the response")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 120*time.Second, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 20*time.Second, "how long to let requests in flight finish after SIGTERM")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return o, o.validate()
}

func (o *attesterOptions) validate() error {
	var errs []error
	lab := o.labChainDir != "" || o.labMeasurement != "" || len(o.labNodeMeasures) > 0 || o.labHostData != "" || o.labPolicy != labtee.DefaultPolicy || o.labGuestSVN != 0 || o.labEPCSize != 0 || len(o.labNodeGPUs) > 0
	switch o.backend {
	case BackendTSM:
		if lab {
			errs = append(errs, errors.New("the --lab-* flags need --backend lab"))
		}
		if o.tsmPrivilege < -1 || o.tsmPrivilege > 3 {
			errs = append(errs, fmt.Errorf("--tsm-privilege-level %d: want -1 to 3", o.tsmPrivilege))
		}
	case BackendLab:
		if o.labChainDir == "" || o.labMeasurement == "" {
			errs = append(errs, errors.New("--backend lab needs --lab-chain-dir and --lab-measurement"))
		}
		if o.tsmPrivilege != -1 {
			errs = append(errs, errors.New("--tsm-privilege-level needs --backend tsm"))
		}
		if o.labGuestSVN > 1<<32-1 {
			errs = append(errs, fmt.Errorf("--lab-guest-svn %d does not fit 32 bits", o.labGuestSVN))
		}
		if o.labEPCSize < 0 {
			errs = append(errs, fmt.Errorf("--lab-epc-size %d is negative", o.labEPCSize))
		}
	default:
		errs = append(errs, fmt.Errorf("--backend %q: want %s or %s", o.backend, BackendTSM, BackendLab))
	}
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together"))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"--report-timeout", o.reportTimeout}, {"--tls-reload-interval", o.tlsReloadInterval},
		{"--read-header-timeout", o.readHeaderTimeout}, {"--read-timeout", o.readTimeout}, {"--write-timeout", o.writeTimeout},
		{"--idle-timeout", o.idleTimeout}, {"--shutdown-timeout", o.shutdownTimeout},
	} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.d))
		}
	}
	return errors.Join(errs...)
}

// parseNodeMeasurements reads node=measurement[,node=measurement...].
func parseNodeMeasurements(v string) (map[string]string, error) {
	m := map[string]string{}
	for _, entry := range strings.Split(v, ",") {
		node, measurement, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || node == "" {
			return nil, fmt.Errorf("entry %q: want node=sha384:<96 hex digits>", entry)
		}
		if _, err := attester.ParseMeasurement(measurement); err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		if _, dup := m[node]; dup {
			return nil, fmt.Errorf("node %s is listed twice", node)
		}
		m[node] = measurement
	}
	return m, nil
}

// backend builds the attester's backend from its flags.
func (o *attesterOptions) newBackend() (attester.Backend, error) {
	if o.backend == BackendTSM {
		c, err := linuxtsm.MakeClient()
		if err != nil {
			return nil, fmt.Errorf("opening configfs-tsm (is /sys/kernel/config mounted, and is this an SEV-SNP or TDX guest?): %w", err)
		}
		t := &attester.TSM{Client: c}
		if o.tsmPrivilege >= 0 {
			level := uint(o.tsmPrivilege)
			t.Privilege = &level
		}
		return t, nil
	}
	chain, err := labtee.ReadSecretDir(o.labChainDir)
	if err != nil {
		return nil, fmt.Errorf("reading the lab chain from %s: %w", o.labChainDir, err)
	}
	flagName, measurement := "--lab-measurement", o.labMeasurement
	if own, ok := o.labNodeMeasures[o.nodeName]; ok && o.nodeName != "" {
		flagName, measurement = "--lab-node-measurements", own
	}
	m, err := attester.ParseMeasurement(measurement)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	hd, err := attester.ParseHostData(o.labHostData)
	if err != nil {
		return nil, fmt.Errorf("--lab-host-data: %w", err)
	}
	return &attester.Lab{Chain: chain, Measurement: m, HostData: hd, Policy: o.labPolicy, GuestSVN: uint32(o.labGuestSVN), EPCSize: o.labEPCSize,
		GPUs: o.labNodeGPUs[o.nodeName]}, nil
}

// parseNodeGPUs reads --lab-node-gpus: GPUs by node, each list as an
// attester may state it (attester.CheckDevices), and each GPU's fields
// known and within the NodeSecurityState's enumerations.
func parseNodeGPUs(v string) (map[string][]v1alpha1.GPUDevice, error) {
	var m map[string][]v1alpha1.GPUDevice
	strict, err := sigsjson.UnmarshalStrict([]byte(v), &m, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err == nil {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, err
	}
	for node, gpus := range m {
		if node == "" {
			return nil, errors.New("a node without a name")
		}
		if err := attester.CheckDevices(gpus); err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		for _, g := range gpus {
			if g.SharingMode != "" && !slices.Contains(v1alpha1.GPUSharingModes, g.SharingMode) || g.CCMode != "" && !slices.Contains(v1alpha1.GPUCCModes, g.CCMode) {
				return nil, fmt.Errorf("node %s: GPU %s: sharingMode %q or ccMode %q is unknown", node, g.ID, g.SharingMode, g.CCMode)
			}
		}
	}
	return m, nil
}

func runAttester(ctx context.Context, o *attesterOptions, stderr io.Writer) error {
	logger := newLogger(stderr, o.logLevel)
	b, err := o.newBackend()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.listen, err)
	}
	return serveAttester(ctx, o, b, ln, logger)
}

// serveAttester serves b on ln until ctx is done.
func serveAttester(ctx context.Context, o *attesterOptions, b attester.Backend, ln net.Listener, logger *slog.Logger) error {
	srv, err := attester.New(attester.Config{Backend: b, Logger: logger, ReportTimeout: o.reportTimeout})
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
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	scheme := "http"
	if o.tlsCertFile != "" {
		if ln, err = tlsListener(ctx, cancel, ln, o.tlsCertFile, o.tlsKeyFile, o.tlsReloadInterval, logger); err != nil {
			return err
		}
		scheme = "https"
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	srv.SetReady(true)
	logger.Info("serving", "addr", ln.Addr().String(), "scheme", scheme, "backend", b.Name(), "version", version.Get())
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
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

// tlsListener wraps ln in TLS with a certificate pair reloaded when its
// files change; a watcher that fails cancels ctx.
func tlsListener(ctx context.Context, cancel func(), ln net.Listener, certFile, keyFile string, reload time.Duration, logger *slog.Logger) (net.Listener, error) {
	// The certificate watcher logs through controller-runtime's logger.
	ctrllog.SetLogger(logr.FromSlogHandler(logger.Handler()))
	watcher, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	watcher = watcher.WithWatchInterval(reload)
	go func() {
		if err := watcher.Start(ctx); err != nil {
			logger.Error("watching the serving certificate failed; stopping", "err", err)
			cancel()
		}
	}()
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate}), nil
}
