package platform

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// pingTimeout bounds the reachability check before any Helm action.
const pingTimeout = 15 * time.Second

// LoadChart loads the chart directory or archive at path.
func LoadChart(path string) (*chart.Chart, error) {
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", path, err)
	}
	return ch, nil
}

// Release is what the provider keeps of a Helm release.
type Release struct {
	Name         string
	Namespace    string
	Revision     int
	Status       string
	ChartName    string
	ChartVersion string
	// Config holds the values given to Helm, without the chart's defaults.
	Config map[string]any
	// Defaults are the default values of the chart the release runs.
	Defaults map[string]any
}

func fromHelm(r *release.Release) *Release {
	out := &Release{Name: r.Name, Namespace: r.Namespace, Revision: r.Version, Config: r.Config}
	if r.Info != nil {
		out.Status = r.Info.Status.String()
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		out.ChartName = r.Chart.Metadata.Name
		out.ChartVersion = r.Chart.Metadata.Version
	}
	if r.Chart != nil {
		out.Defaults = r.Chart.Values
	}
	if out.Config == nil {
		out.Config = map[string]any{}
	}
	return out
}

// Client runs Helm actions in one namespace of one cluster.
type Client struct {
	namespace string
	cfg       *action.Configuration
	getter    *clientGetter
}

// Connect checks that the cluster answers and prepares Helm for namespace.
// An unreachable cluster is an *UnreachableError.
func Connect(ctx context.Context, kc Kubeconfig, namespace string) (*Client, error) {
	getter, err := newClientGetter(kc, namespace)
	if err != nil {
		return nil, err
	}
	if err := getter.ping(ctx, pingTimeout); err != nil {
		return nil, err
	}
	cfg := &action.Configuration{}
	if err := cfg.Init(getter, namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("preparing Helm: %w", err)
	}
	return &Client{namespace: namespace, cfg: cfg, getter: getter}, nil
}

// Get returns the current release name, or nil when there is none.
func (c *Client) Get(name string) (*Release, error) {
	r, err := action.NewGet(c.cfg).Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading release %s/%s: %w", c.namespace, name, err)
	}
	return fromHelm(r), nil
}

// Apply installs release name, or upgrades it when it exists, with exactly
// vals over the chart's defaults, and waits up to timeout for its
// workloads to be ready. On failure the release, if Helm recorded one, is
// returned with the error.
func (c *Client) Apply(ctx context.Context, ch *chart.Chart, name string, vals map[string]any, timeout time.Duration) (*Release, error) {
	cur, err := c.Get(name)
	if err != nil {
		return nil, err
	}
	var r *release.Release
	if cur == nil || cur.Status == release.StatusUninstalled.String() {
		inst := action.NewInstall(c.cfg)
		inst.ReleaseName = name
		inst.Namespace = c.namespace
		inst.CreateNamespace = true
		// The provider applies and owns the CRDs itself (ApplyCRDs), so
		// the copy in the chart's crds/ is left alone.
		inst.SkipCRDs = true
		inst.Wait = true
		inst.Timeout = timeout
		r, err = inst.RunWithContext(ctx, ch, deepCopy(vals).(map[string]any))
		err = wrap(err, "installing", c.namespace, name, timeout)
	} else {
		up := action.NewUpgrade(c.cfg)
		up.Namespace = c.namespace
		up.ResetValues = true
		up.Wait = true
		up.Timeout = timeout
		r, err = up.RunWithContext(ctx, name, ch, deepCopy(vals).(map[string]any))
		err = wrap(err, "upgrading", c.namespace, name, timeout)
	}
	if err != nil {
		if got, gerr := c.Get(name); gerr == nil && got != nil {
			return got, err
		}
		return nil, err
	}
	return fromHelm(r), nil
}

// Uninstall removes release name and waits up to timeout for its
// resources to be gone. A missing release is not an error.
func (c *Client) Uninstall(name string, timeout time.Duration) error {
	un := action.NewUninstall(c.cfg)
	un.Wait = true
	un.Timeout = timeout
	un.IgnoreNotFound = true
	if _, err := un.Run(name); err != nil {
		return fmt.Errorf("uninstalling release %s/%s: %w", c.namespace, name, err)
	}
	return nil
}

func wrap(err error, verb, ns, name string, timeout time.Duration) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "context deadline exceeded") || strings.Contains(msg, "timed out waiting") {
		return fmt.Errorf("%s release %s/%s: its workloads were not ready within %s (kubectl -n %s get pods shows why): %w", verb, ns, name, timeout, ns, err)
	}
	return fmt.Errorf("%s release %s/%s: %w", verb, ns, name, err)
}
