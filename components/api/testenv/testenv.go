// Package testenv starts a real kube-apiserver and etcd with the guard CRDs
// installed, for the integration tests of every component.
//
// The binaries come from KUBEBUILDER_ASSETS (make envtest builds them into
// _output/envtest). A test package uses it from TestMain:
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, func(e *testenv.Env) error {
//			k8s = e.Client
//			return nil
//		})
//	}
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// startTimeout bounds how long kube-apiserver and etcd may take to start.
const startTimeout = 3 * time.Minute

// Env is a running API server with the guard CRDs.
type Env struct {
	// Environment is the envtest environment, for adding users.
	Environment *envtest.Environment
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// Scheme knows the built-in kinds, CRDs and the guard kinds.
	Scheme *k8sruntime.Scheme
	// Client is a controller-runtime client on Config and Scheme.
	Client client.Client
	// Assets is the directory of the kube-apiserver, etcd and kubectl binaries.
	Assets string
	// Dir is a scratch directory removed when the environment stops.
	Dir string

	cleanups []func()
}

// Main starts the environment, lets setup fill the package's variables,
// runs the tests, stops everything and exits with the tests' status. A
// failure to start is reported and exits with status 1, never skipped.
func Main(m *testing.M, setup func(*Env) error) {
	MainWith(m, Options{}, setup)
}

// Options change how kube-apiserver runs.
type Options struct {
	// FeatureGates are turned on, e.g. DRADeviceTaints.
	FeatureGates []string
	// RuntimeConfig are API versions served besides the defaults, e.g.
	// resource.k8s.io/v1alpha3.
	RuntimeConfig []string
}

// MainWith is Main with a kube-apiserver run as o says.
func MainWith(m *testing.M, o Options, setup func(*Env) error) {
	code, err := run(m, o, setup)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M, o Options, setup func(*Env) error) (int, error) {
	e, err := StartWith(o)
	if err != nil {
		return 0, err
	}
	defer e.Stop()
	if err := setup(e); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// Start checks KUBEBUILDER_ASSETS and starts kube-apiserver and etcd with
// the CRDs of components/api/config/crd installed.
func Start() (*Env, error) { return StartWith(Options{}) }

// StartWith is Start with a kube-apiserver run as o says.
func StartWith(o Options) (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run make integration, or make envtest and point it at _output/envtest")
	}
	for _, bin := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := exec.LookPath(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("KUBEBUILDER_ASSETS=%s has no usable %s: %w", assets, bin, err)
		}
	}
	crds, err := CRDDir()
	if err != nil {
		return nil, err
	}
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "xila-guard-integration-")
	if err != nil {
		return nil, err
	}
	e := &Env{
		Environment: &envtest.Environment{
			CRDDirectoryPaths:     []string{crds},
			ErrorIfCRDPathMissing: true,
			Scheme:                scheme,
			BinaryAssetsDirectory: assets,
			// A loaded CI machine can take well over envtest's default 20s
			// to bring kube-apiserver up.
			ControlPlaneStartTimeout: startTimeout,
			ControlPlaneStopTimeout:  time.Minute,
		},
		Scheme: scheme,
		Assets: assets,
		Dir:    dir,
	}
	e.cleanups = append(e.cleanups, func() { _ = os.RemoveAll(dir) })
	args := e.Environment.ControlPlane.GetAPIServer().Configure()
	for _, g := range o.FeatureGates {
		args.Append("feature-gates", g+"=true")
	}
	for _, v := range o.RuntimeConfig {
		args.Append("runtime-config", v+"=true")
	}
	if e.Config, err = e.Environment.Start(); err != nil {
		e.Stop()
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	e.cleanups = append(e.cleanups, func() { _ = e.Environment.Stop() })
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// Stop stops the API server and etcd and removes the scratch directory.
func (e *Env) Stop() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}

// Kubeconfig writes a kubeconfig for a user of the given groups into the
// scratch directory and returns its path.
func (e *Env) Kubeconfig(name string, groups ...string) (string, error) {
	u, err := e.Environment.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("adding user %s: %w", name, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(e.Dir, "kubeconfig-"+name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// Kubectl is the path of the kubectl binary next to the API server.
func (e *Env) Kubectl() string { return filepath.Join(e.Assets, "kubectl") }

// CRDDir is components/api/config/crd in the source tree this package was
// built from.
func CRDDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the testenv package source")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "config", "crd")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("CRD directory: %w", err)
	}
	return dir, nil
}
