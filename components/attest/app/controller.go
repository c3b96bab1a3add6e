package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/probes"
	"github.com/xila-guard/xila-guard/components/api/version"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/controller"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
	"github.com/xila-guard/xila-guard/components/attest/verify"
)

// RBAC of the controller's service account, the only writer of attested
// NodeSecurityStates. config/rbac/role.yaml is generated from these
// markers.
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io;"",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=guard.xila.us,resources=nodesecuritystates,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceslices,verbs=list
//
// The lab chain Secret (--lab-chain-secret) is read and created in the
// controller's own namespace only: the chart grants that with a Role.

// LeaderElectionID names the Lease the controller's replicas compete for.
const LeaderElectionID = "xila-guard-attest.guard.xila.us"

// TDXCollateralIntel is the --tdx-collateral value that fetches collateral
// from Intel's Provisioning Certification Service itself.
const TDXCollateralIntel = "intel"

// DefaultAttesterSelector selects the attester pods.
const DefaultAttesterSelector = "app.kubernetes.io/name=xila-guard-attester"

// ControllerOptions are the controller's flags.
type ControllerOptions struct {
	kubeconfig         string
	profile            guard.Profile
	labRootFile        string
	labChainSecret     types.NamespacedName
	referenceValues    string
	tdxCollateral      string
	tdxCollateralTTL   time.Duration
	verifierName       string
	maxChallengeAge    time.Duration
	attesterNamespace  string
	attesterSelector   labels.Selector
	attesterPort       int
	attesterCAFile     string
	attesterServerName string
	attesterTimeout    time.Duration
	interval           time.Duration
	retryInterval      time.Duration
	challengeAddr      string
	challengeTimeout   time.Duration
	challengeCertFile  string
	challengeKeyFile   string
	workers            int
	metricsAddr        string
	probeAddr          string
	leaderElect        bool
	leaderElectionNS   string
	logLevel           slog.Level
}

// ParseControllerFlags reads the controller's flags from args; usage goes
// to stderr.
func ParseControllerFlags(args []string, stderr io.Writer) (*ControllerOptions, error) {
	o := &ControllerOptions{}
	fs := flag.NewFlagSet(Name+" controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var profile, selector string
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses in-cluster config or $KUBECONFIG")
	fs.StringVar(&profile, "profile", string(guard.ProfileProduction), "verification profile: production trusts AMD's and Intel's roots only; lab also trusts --lab-root-file")
	fs.StringVar(&o.labRootFile, "lab-root-file", "", "the lab chain's cert_chain.pem (ASK then ARK): trusted under --profile lab; under production, evidence chaining to it is refused as TEST_ROOT_OF_TRUST")
	fs.Func("lab-chain-secret", "namespace/name of the lab chain Secret, instead of --lab-root-file: under --profile lab it is created with a new chain when missing, and its "+labtee.SecretCertChain+" is the lab root; under production it is only read, so that evidence signed with it is refused as TEST_ROOT_OF_TRUST", func(v string) error {
		ns, name, ok := strings.Cut(v, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("%q: want namespace/name", v)
		}
		o.labChainSecret = types.NamespacedName{Namespace: ns, Name: name}
		return nil
	})
	fs.StringVar(&o.referenceValues, "reference-values", "", "reference values file (YAML or JSON: allowed measurements, minimum TCBs), read again when it changes; required")
	fs.StringVar(&o.tdxCollateral, "tdx-collateral", "", "where Intel's TDX collateral (TCB info, QE identity, CRLs) comes from: intel for Intel's PCS, or the base URL of a mirror serving the same paths; empty refuses TDX evidence as QUOTE_INVALID, since its TCB cannot be rated; each fetch is bounded by --attester-timeout")
	fs.DurationVar(&o.tdxCollateralTTL, "tdx-collateral-cache", time.Hour, "how long fetched TDX collateral is reused")
	fs.StringVar(&o.verifierName, "verifier-name", controller.DefaultVerifierName, "the verifier the verdicts name")
	fs.DurationVar(&o.maxChallengeAge, "max-challenge-age", verify.DefaultMaxChallengeAge, "oldest a challenge may be when its answer is verified")
	fs.StringVar(&o.attesterNamespace, "attester-namespace", "xila-guard-system", "namespace of the attester pods")
	fs.StringVar(&selector, "attester-selector", DefaultAttesterSelector, "label selector of the attester pods")
	fs.IntVar(&o.attesterPort, "attester-port", 8443, "attester port, when its pod names no container port "+controller.AttesterPortName)
	fs.StringVar(&o.attesterCAFile, "attester-ca-file", "", "PEM CA bundle; when set, attesters are asked over HTTPS and must present a certificate it issued")
	fs.StringVar(&o.attesterServerName, "attester-server-name", "xila-guard-attester", "name the attesters' certificates carry, with --attester-ca-file")
	fs.DurationVar(&o.attesterTimeout, "attester-timeout", controller.DefaultFetchTimeout, "bound on one request to an attester")
	fs.DurationVar(&o.interval, "interval", controller.DefaultInterval, "how often each node is challenged again; keep it well below the policies' evidence maxAge")
	fs.DurationVar(&o.retryInterval, "retry-interval", controller.DefaultRetryInterval, "how soon a node whose attester did not answer is challenged again")
	fs.StringVar(&o.challengeAddr, "challenge-bind-address", ":8081", "address of POST /v1/challenge/{node}; 0 disables it")
	fs.DurationVar(&o.challengeTimeout, "challenge-timeout", controller.DefaultChallengeTimeout, "bound on one synchronous challenge")
	fs.StringVar(&o.challengeCertFile, "challenge-tls-cert-file", "", "PEM certificate; with --challenge-tls-key-file the challenge endpoint serves HTTPS")
	fs.StringVar(&o.challengeKeyFile, "challenge-tls-key-file", "", "PEM private key of --challenge-tls-cert-file")
	fs.IntVar(&o.workers, "workers", 8, "nodes challenged at once")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9090", "address of the /metrics endpoint; 0 disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":9091", "address of /healthz and /readyz")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader, so that two replicas can run; only the leader challenges nodes on its interval, every replica answers the synchronous challenge")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader Lease; empty for the pod's own")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	o.profile = guard.Profile(profile)
	var errs []error
	if !o.profile.IsValid() {
		errs = append(errs, fmt.Errorf("--profile %q: want %s or %s", profile, guard.ProfileProduction, guard.ProfileLab))
	}
	if o.referenceValues == "" {
		errs = append(errs, errors.New("--reference-values is required: without reference values no measurement is allowed"))
	}
	sel, err := labels.Parse(selector)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("--attester-selector: %w", err))
	case sel.Empty():
		errs = append(errs, errors.New("--attester-selector must select something"))
	}
	o.attesterSelector = sel
	if o.attesterNamespace == "" {
		errs = append(errs, errors.New("--attester-namespace is required"))
	}
	if o.attesterPort < 1 || o.attesterPort > 65535 {
		errs = append(errs, fmt.Errorf("--attester-port %d: want 1 to 65535", o.attesterPort))
	}
	if c := o.tdxCollateral; c != "" && c != TDXCollateralIntel {
		if u, err := url.Parse(c); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("--tdx-collateral %q: want %s or an http(s) base URL with no query", c, TDXCollateralIntel))
		}
	}
	if o.labRootFile != "" && o.labChainSecret.Name != "" {
		errs = append(errs, errors.New("--lab-root-file and --lab-chain-secret exclude each other"))
	}
	if (o.challengeCertFile == "") != (o.challengeKeyFile == "") {
		errs = append(errs, errors.New("--challenge-tls-cert-file and --challenge-tls-key-file go together"))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"--max-challenge-age", o.maxChallengeAge}, {"--attester-timeout", o.attesterTimeout}, {"--interval", o.interval},
		{"--retry-interval", o.retryInterval}, {"--challenge-timeout", o.challengeTimeout}, {"--tdx-collateral-cache", o.tdxCollateralTTL},
	} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.d))
		}
	}
	if o.attesterTimeout >= o.maxChallengeAge {
		errs = append(errs, fmt.Errorf("--attester-timeout %s must be below --max-challenge-age %s", o.attesterTimeout, o.maxChallengeAge))
	}
	if o.workers < 1 {
		errs = append(errs, errors.New("--workers must be at least 1"))
	}
	return o, errors.Join(errs...)
}

func runController(ctx context.Context, o *ControllerOptions, stderr io.Writer) error {
	log := logr.FromSlogHandler(newLogger(stderr, o.logLevel).Handler())
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	return RunControllerWithConfig(ctx, cfg, o, log)
}

// RunControllerWithConfig runs the controller against the cluster of cfg
// until ctx ends. It registers its metrics with controller-runtime's
// registry, so it runs once per process.
func RunControllerWithConfig(ctx context.Context, cfg *rest.Config, o *ControllerOptions, log logr.Logger) error {
	ctrl.SetLogger(log)
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	vopts := verify.Options{MaxChallengeAge: o.maxChallengeAge}
	if o.tdxCollateral != "" {
		pcs := &verify.PCS{HTTP: &http.Client{Timeout: o.attesterTimeout}, TTL: o.tdxCollateralTTL}
		if o.tdxCollateral != TDXCollateralIntel {
			pcs.BaseURL = o.tdxCollateral
		}
		vopts.TDXCollateral = pcs
	}
	if o.labRootFile != "" {
		root, err := os.ReadFile(o.labRootFile)
		if err != nil {
			return fmt.Errorf("--lab-root-file: %w", err)
		}
		vopts.LabSNPRoot = root
	}
	if o.labChainSecret.Name != "" {
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		if vopts.LabSNPRoot, err = labChainRoot(ctx, c, o.labChainSecret, o.profile == guard.ProfileLab, log); err != nil {
			return fmt.Errorf("--lab-chain-secret %s: %w", o.labChainSecret, err)
		}
	}
	v, err := verify.New(vopts)
	if err != nil {
		return err
	}
	refs := &controller.ReferenceFile{Path: o.referenceValues}
	if _, err := refs.References(); err != nil {
		return err
	}
	fetch, err := o.attesterClient()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        log,
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       o.leaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			// Only the attester pods are watched, not every pod.
			ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {
				Namespaces: map[string]cache.Config{o.attesterNamespace: {}},
				Label:      o.attesterSelector,
			}},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	m, err := controller.NewMetrics(nil, nil)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	attesterScheme := "http"
	if o.attesterCAFile != "" {
		attesterScheme = "https"
	}
	r := &controller.Reconciler{
		Client:        mgr.GetClient(),
		Reader:        mgr.GetAPIReader(),
		Attesters:     controller.Attesters{Namespace: o.attesterNamespace, Selector: o.attesterSelector, Port: int32(o.attesterPort), Scheme: attesterScheme},
		Fetcher:       fetch,
		Verifier:      v,
		Profile:       o.profile,
		References:    refs,
		VerifierName:  o.verifierName,
		Interval:      o.interval,
		RetryInterval: o.retryInterval,
		FetchTimeout:  o.attesterTimeout,
		Recorder:      mgr.GetEventRecorder(Name),
		Metrics:       m,
	}
	if err := r.SetupWithManager(ctx, mgr, o.workers); err != nil {
		return fmt.Errorf("setting up the attestation controller: %w", err)
	}
	if o.challengeAddr != "0" {
		// Every replica answers: the state it writes is read from and
		// written to the API server (a write that races the leader's
		// conflicts and fails), so the Service needs no leader routing.
		h := &controller.ChallengeHandler{Reconciler: r, Timeout: o.challengeTimeout, Log: log.WithName("challenge")}
		if err := mgr.Add(&httpServer{what: "challenges", addr: o.challengeAddr, handler: h.Handler(), certFile: o.challengeCertFile,
			keyFile: o.challengeKeyFile, timeout: o.challengeTimeout, log: log}); err != nil {
			return err
		}
	}
	if err := probes.Add(mgr); err != nil {
		return err
	}
	log.Info("starting", "version", version.Get(), "profile", o.profile, "labRoot", o.labRootFile != "",
		"attesters", o.attesterNamespace+"/"+o.attesterSelector.String(), "interval", o.interval.String(), "leaderElect", o.leaderElect)
	return mgr.Start(ctx)
}

// attesterClient is the HTTP client the attesters are asked with.
func (o *ControllerOptions) attesterClient() (*attester.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Attesters are pods of the cluster network, never behind a proxy.
	transport.Proxy = nil
	transport.MaxIdleConnsPerHost = 2
	if o.attesterCAFile != "" {
		pem, err := os.ReadFile(o.attesterCAFile)
		if err != nil {
			return nil, fmt.Errorf("--attester-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--attester-ca-file %s holds no PEM certificate", o.attesterCAFile)
		}
		transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: o.attesterServerName}
	}
	return &attester.Client{HTTP: &http.Client{Transport: transport, Timeout: o.attesterTimeout}}, nil
}

// httpServer serves an HTTP endpoint on every replica: the synchronous
// challenge, the key broker.
type httpServer struct {
	what              string
	addr              string
	handler           http.Handler
	certFile, keyFile string
	timeout           time.Duration
	log               logr.Logger
}

var (
	_ manager.Runnable               = (*httpServer)(nil)
	_ manager.LeaderElectionRunnable = (*httpServer)(nil)
)

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *httpServer) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (s *httpServer) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.addr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slogger := slog.New(logr.ToSlogHandler(s.log))
	scheme := "http"
	if s.certFile != "" {
		if ln, err = tlsListener(ctx, cancel, ln, s.certFile, s.keyFile, 10*time.Second, slogger); err != nil {
			return err
		}
		scheme = "https"
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      s.timeout + 5*time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(slogger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	s.log.Info("serving "+s.what, "addr", ln.Addr().String(), "scheme", scheme)
	select {
	case err := <-served:
		return fmt.Errorf("serving %s: %w", s.what, err)
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer scancel()
	return hs.Shutdown(sctx)
}
