// Package apiserver starts the real kube-apiserver and etcd (envtest
// assets, built by make envtest) that the benchmarks run against, with the
// guard CRDs installed and unthrottled clients.
package apiserver

import (
	"fmt"
	"os"
	"path/filepath"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Server is a running API server and etcd.
type Server struct {
	env *envtest.Environment
	// Config reaches the API server as an administrator, unthrottled.
	Config *rest.Config
	Kube   kubernetes.Interface
	Guard  client.Client
	// Kubeconfig is the path of a kubeconfig for the user Start was given,
	// a member of system:masters, for the component under test.
	Kubeconfig string
	// Dir is a scratch directory removed by Stop.
	Dir string
}

// Start starts kube-apiserver and etcd from the assets directory with the
// CRDs of crds, and writes a kubeconfig for user into a new scratch
// directory whose name starts with prefix.
func Start(assets, crds, user, prefix string) (*Server, error) {
	os.Setenv("KUBEBUILDER_ASSETS", assets)
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	s := &Server{env: &envtest.Environment{CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true, Scheme: scheme}}
	cfg, err := s.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	s.Config = rest.CopyConfig(cfg)
	s.Config.QPS, s.Config.Burst = -1, -1
	if s.Kube, err = kubernetes.NewForConfig(s.Config); err != nil {
		return nil, err
	}
	if s.Guard, err = client.New(s.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	u, err := s.env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return nil, err
	}
	if s.Dir, err = os.MkdirTemp("", prefix+"-"); err != nil {
		return nil, err
	}
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, data, 0o600); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// Stop stops the API server and etcd and removes the scratch directory.
func (s *Server) Stop() {
	_ = s.env.Stop()
	if s.Dir != "" {
		os.RemoveAll(s.Dir)
	}
}
