package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/probes"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/api/version"
	"github.com/xila-guard/xila-guard/components/attest/kbs"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
)

// KeyBrokerOptions are the key broker's flags.
type KeyBrokerOptions struct {
	kubeconfig  string
	namespace   string
	profile     guard.Profile
	addr        string
	certFile    string
	keyFile     string
	sessionTTL  time.Duration
	maxSessions int
	requestTTL  time.Duration
	auditLog    string
	metricsAddr string
	probeAddr   string
	logLevel    slog.Level
}

// ParseKeyBrokerFlags reads the key broker's flags from args; usage goes
// to stderr.
func ParseKeyBrokerFlags(args []string, stderr io.Writer) (*KeyBrokerOptions, error) {
	o := &KeyBrokerOptions{}
	fs := flag.NewFlagSet(Name+" key-broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var profile string
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses in-cluster config or $KUBECONFIG")
	fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the key Secrets that KeyReleasePolicies name; $POD_NAMESPACE by default")
	fs.StringVar(&profile, "profile", string(guard.ProfileProduction), "evaluator profile the node's evidence is judged under: production or lab")
	fs.StringVar(&o.addr, "bind-address", ":8082", "address of the KBS endpoints (/kbs/v0/...)")
	fs.StringVar(&o.certFile, "tls-cert-file", "", "PEM certificate; with --tls-key-file the broker serves HTTPS, reloading the pair when it changes")
	fs.StringVar(&o.keyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.DurationVar(&o.sessionTTL, "session-ttl", kbs.DefaultSessionTTL, "how long a session lives from auth; keys are judged again at every request")
	fs.IntVar(&o.maxSessions, "max-sessions", kbs.DefaultMaxSessions, "most sessions held at once; auth answers 503 beyond")
	fs.DurationVar(&o.requestTTL, "request-timeout", 10*time.Second, "bound on one request, token review and reads included")
	fs.StringVar(&o.auditLog, "audit-log", "-", "file the JSON line of every decision is appended to; - for stdout")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9090", "address of the /metrics endpoint; 0 disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":9091", "address of /healthz and /readyz")
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
	if o.namespace == "" {
		errs = append(errs, errors.New("--namespace is required (or $POD_NAMESPACE)"))
	}
	if (o.certFile == "") != (o.keyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together"))
	}
	if o.sessionTTL <= 0 || o.requestTTL <= 0 {
		errs = append(errs, errors.New("--session-ttl and --request-timeout must be positive"))
	}
	if o.maxSessions < 1 {
		errs = append(errs, errors.New("--max-sessions must be at least 1"))
	}
	if o.auditLog == "" {
		errs = append(errs, errors.New("--audit-log is required: - for stdout"))
	}
	return o, errors.Join(errs...)
}

func runKeyBroker(ctx context.Context, o *KeyBrokerOptions, stdout, stderr io.Writer) error {
	log := logr.FromSlogHandler(newLogger(stderr, o.logLevel).Handler())
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	audit := stdout
	if o.auditLog != "-" {
		f, err := os.OpenFile(o.auditLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("--audit-log: %w", err)
		}
		defer f.Close()
		audit = f
	}
	return RunKeyBrokerWithConfig(ctx, cfg, o, audit, log)
}

// RunKeyBrokerWithConfig runs the key broker against the cluster of cfg
// until ctx ends, writing its audit lines to audit. Every replica serves;
// sessions live in the replica that opened them, so the Service pins a
// client to one replica (sessionAffinity: ClientIP).
func RunKeyBrokerWithConfig(ctx context.Context, cfg *rest.Config, o *KeyBrokerOptions, audit io.Writer, log logr.Logger) error {
	ctrl.SetLogger(log)
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.probeAddr,
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			// The key Secrets of the broker's namespace only.
			ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{o.namespace: {}},
			}},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.TenantBinding{}, kbs.IndexBindingNamespace, kbs.IndexBindingNamespaces); err != nil {
		return fmt.Errorf("indexing TenantBindings: %w", err)
	}
	// Start the informers the broker reads with the manager, so that the
	// first request does not wait for them.
	for _, obj := range []client.Object{&corev1.Namespace{}, &corev1.Secret{}, &v1alpha1.TenantBinding{},
		&v1alpha1.PlacementPolicy{}, &v1alpha1.KeyReleasePolicy{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	ev, err := evaluate.New(evaluate.Options{Profile: o.profile})
	if err != nil {
		return err
	}
	b, err := kbs.New(kbs.Options{
		Cache:       mgr.GetClient(),
		Live:        mgr.GetAPIReader(),
		Tokens:      kbs.TokenReviews{Client: mgr.GetClient()},
		Keys:        kbs.Secrets{Reader: mgr.GetClient(), Namespace: o.namespace},
		Evaluator:   ev,
		Events:      mgr.GetEventRecorder(Name + "-key-broker"),
		Audit:       kbs.NewAudit(audit),
		Log:         log.WithName("key-broker"),
		SessionTTL:  o.sessionTTL,
		MaxSessions: o.maxSessions,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(&httpServer{what: "keys", addr: o.addr, handler: withTimeout(b, o.requestTTL), certFile: o.certFile,
		keyFile: o.keyFile, timeout: o.requestTTL, log: log}); err != nil {
		return err
	}
	if err := probes.Add(mgr); err != nil {
		return err
	}
	log.Info("starting", "version", version.Get(), "profile", o.profile, "namespace", o.namespace, "addr", o.addr, "tls", o.certFile != "")
	return mgr.Start(ctx)
}

// withTimeout bounds every request's context: a slow API server makes the
// request fail (503), never hang.
func withTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
