package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
)

// options are the command-line settings of xila-guard-core.
type options struct {
	listen            string
	profile           string
	tlsCertFile       string
	tlsKeyFile        string
	tlsReloadInterval time.Duration
	maxRequestBytes   int64
	maxNodes          int
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	shutdownTimeout   time.Duration
	clockSkew         time.Duration
	logLevel          slog.Level
	version           bool
}

// parseFlags reads args. Usage errors and -h are written to stderr.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet(guard.CoreServiceName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", ":8080", "address to serve on")
	fs.StringVar(&o.profile, "profile", string(guard.ProfileProduction),
		"evaluation profile: production never accepts mock evidence; lab accepts it as simulated integration")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "PEM certificate; with --tls-key-file serves HTTPS, reloading the pair when the files change")
	fs.StringVar(&o.tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.DurationVar(&o.tlsReloadInterval, "tls-reload-interval", 10*time.Second, "how often the TLS files are read again, besides when they change")
	fs.Int64Var(&o.maxRequestBytes, "max-request-bytes", 16<<20, "largest request body accepted; larger ones get 413")
	fs.IntVar(&o.maxNodes, "max-nodes", 10000, "most candidate nodes in one request; 0 for no limit")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", 5*time.Second, "time allowed to read request headers")
	fs.DurationVar(&o.readTimeout, "read-timeout", 10*time.Second, "time allowed to read a whole request")
	fs.DurationVar(&o.writeTimeout, "write-timeout", 10*time.Second, "time allowed from the end of the headers to the end of the response")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 120*time.Second, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 20*time.Second, "how long to let requests in flight finish after SIGTERM")
	fs.DurationVar(&o.clockSkew, "clock-skew", evaluate.DefaultClockSkew, "how far in the future an evidence timestamp may lie")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return o, o.validate()
}

func (o *options) validate() error {
	var errs []error
	if !guard.Profile(o.profile).IsValid() {
		errs = append(errs, fmt.Errorf("--profile %q: want %q or %q", o.profile, guard.ProfileProduction, guard.ProfileLab))
	}
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together"))
	}
	for name, d := range map[string]time.Duration{
		"--tls-reload-interval": o.tlsReloadInterval, "--read-header-timeout": o.readHeaderTimeout,
		"--read-timeout": o.readTimeout, "--write-timeout": o.writeTimeout,
		"--idle-timeout": o.idleTimeout, "--shutdown-timeout": o.shutdownTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	if o.maxRequestBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-request-bytes must be positive, got %d", o.maxRequestBytes))
	}
	if o.maxNodes < 0 {
		errs = append(errs, fmt.Errorf("--max-nodes must not be negative, got %d", o.maxNodes))
	}
	if o.clockSkew < 0 {
		errs = append(errs, fmt.Errorf("--clock-skew must not be negative, got %s", o.clockSkew))
	}
	return errors.Join(errs...)
}
