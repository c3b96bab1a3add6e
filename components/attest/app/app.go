// Package app is the xila-guard-attest command: its subcommands, their
// flags, logging and lifecycle. main only calls Main.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/xila-guard/xila-guard/components/api/version"
)

// Name is the command's name.
const Name = "xila-guard-attest"

const usage = `usage: ` + Name + ` <command> [flags]

commands:
  controller     challenge every node's attester and write attested NodeSecurityStates
  attester       answer challenges with this node's TEE evidence
  key-broker     release tenants' keys to their pods on attested nodes (KBS protocol)
  kbs-client     fetch keys from the key broker with this pod's service-account token
  tee-resources  advertise this node's SGX EPC and enclave devices from its evidence
  version        print the version

Run a command with -h for its flags.
`

// Main runs the command with the process's arguments until SIGTERM or
// SIGINT, and returns the exit code. It is the only place that knows about
// the process.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		return 1
	}
}

// Run runs the subcommand args name until ctx is done. Logs go to stderr
// as JSON; the version goes to stdout.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "controller":
		o, err := ParseControllerFlags(args[1:], stderr)
		if err != nil {
			return err
		}
		return runController(ctx, o, stderr)
	case "attester":
		o, err := parseAttesterFlags(args[1:], stderr)
		if err != nil {
			return err
		}
		return runAttester(ctx, o, stderr)
	case "key-broker":
		o, err := ParseKeyBrokerFlags(args[1:], stderr)
		if err != nil {
			return err
		}
		return runKeyBroker(ctx, o, stdout, stderr)
	case "kbs-client":
		return runKBSClient(ctx, args[1:], stdout, stderr)
	case "tee-resources":
		o, err := ParseTEEResourcesFlags(args[1:], stderr)
		if err != nil {
			return err
		}
		return runTEEResources(ctx, o, stderr)
	case "version", "--version", "-version":
		_, err := fmt.Fprintf(stdout, "%s %s\n", Name, version.Get())
		return err
	case "help", "-h", "--help":
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// newLogger returns the JSON logger of a subcommand.
func newLogger(stderr io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// restConfig loads the kubeconfig file, or the in-cluster config or
// $KUBECONFIG when it is empty.
func restConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// newScheme is the scheme of every subcommand: the core kinds and the
// guard kinds.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}
