package platform

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Kubeconfig says how to reach a cluster: the content of a kubeconfig, or
// a path to one, and optionally a context in it.
type Kubeconfig struct {
	Content string
	Path    string
	Context string
}

// UnreachableError means the API server of the cluster did not answer.
type UnreachableError struct {
	Host string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the Kubernetes API server at %s: %v (check that the cluster is running and that the kubeconfig points at it)", e.Host, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// clientGetter implements Helm's RESTClientGetter for one kubeconfig.
type clientGetter struct {
	loader clientcmd.ClientConfig
	config *rest.Config
}

func newClientGetter(kc Kubeconfig, namespace string) (*clientGetter, error) {
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kc.Context}
	overrides.Context.Namespace = namespace
	var cc clientcmd.ClientConfig
	switch {
	case kc.Content != "":
		raw, err := clientcmd.Load([]byte(kc.Content))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		cc = clientcmd.NewDefaultClientConfig(*raw, overrides)
	case kc.Path != "":
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kc.Path}
		cc = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	default:
		return nil, fmt.Errorf("no kubeconfig: set kubeconfig or kubeconfig_path")
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return &clientGetter{loader: cc, config: cfg}, nil
}

func (g *clientGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.config), nil }

func (g *clientGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(g.config)
	if err != nil {
		return nil, err
	}
	return memory.NewMemCacheClient(dc), nil
}

func (g *clientGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(dc)
	return restmapper.NewShortcutExpander(mapper, dc, nil), nil
}

func (g *clientGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig { return g.loader }

// ping asks the API server for its version, within timeout.
func (g *clientGetter) ping(ctx context.Context, timeout time.Duration) error {
	cfg := rest.CopyConfig(g.config)
	cfg.Timeout = timeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, err := cs.Discovery().ServerVersion()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return &UnreachableError{Host: g.config.Host, Err: err}
		}
		return nil
	case <-ctx.Done():
		return &UnreachableError{Host: g.config.Host, Err: ctx.Err()}
	}
}
