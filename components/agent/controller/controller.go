package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/enforcer"
	"github.com/xila-guard/xila-guard/components/agent/hostnet"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// Enforcer is what the controller needs of *enforcer.Enforcer.
type Enforcer interface {
	Sync(pods []enforcer.Pod, compiled map[types.NamespacedName]compiler.PodRules, held []enforcer.Held, frontends []netip.Prefix) ([]enforcer.Outcome, error)
	Hold(held []enforcer.Held) error
}

var _ Enforcer = (*enforcer.Enforcer)(nil)

// Config configures a Controller.
type Config struct {
	// NodeName is the node whose pods this agent enforces.
	NodeName string
	// ServiceCIDRs are the cluster's Service ranges, judged after DNAT
	// even before a Service in them is seen.
	ServiceCIDRs []netip.Prefix
	// Resync re-runs the reconcile even when nothing changed.
	Resync time.Duration
	// RetryDelay is the wait before retrying a failed reconcile.
	RetryDelay time.Duration
}

// Deps are the controller's collaborators.
type Deps struct {
	Informers informers.SharedInformerFactory
	Enforcer  Enforcer
	// ReadHost reads the node's routes and addresses (hostnet.Read).
	ReadHost func() (hostnet.State, error)
	Recorder record.EventRecorder
	Metrics  *Metrics
	Log      *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Controller keeps the dataplane in step with the cluster.
type Controller struct {
	cfg  Config
	deps Deps

	pods       corelisters.PodLister
	namespaces corelisters.NamespaceLister
	services   corelisters.ServiceLister
	policies   networkinglisters.NetworkPolicyLister
	hasSynced  []cache.InformerSynced

	wake chan struct{}

	mu      sync.Mutex
	pending map[string]trigger

	// Touched by the loop only.
	denyAll map[types.NamespacedName]string
	held    map[int]bool // interfaces held until their pod is known

	ready    atomic.Bool
	lastLoop atomic.Int64
}

// trigger is a change waiting to be enforced.
type trigger struct {
	kind, name string
	seen       time.Time
}

// New builds a controller and registers its event handlers on the
// informers. Start the factory after New, then call Run.
func New(cfg Config, deps Deps) (*Controller, error) {
	if cfg.NodeName == "" {
		return nil, fmt.Errorf("no node name")
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics(nil)
	}
	c := &Controller{
		cfg: cfg, deps: deps,
		wake:    make(chan struct{}, 1),
		pending: map[string]trigger{},
		denyAll: map[types.NamespacedName]string{},
		held:    map[int]bool{},
	}
	f := deps.Informers
	podInf := f.Core().V1().Pods()
	nsInf := f.Core().V1().Namespaces()
	svcInf := f.Core().V1().Services()
	npInf := f.Networking().V1().NetworkPolicies()
	c.pods, c.namespaces, c.services, c.policies = podInf.Lister(), nsInf.Lister(), svcInf.Lister(), npInf.Lister()
	for _, reg := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{podInf.Informer(), c.handler("Pod", podChanged, nil)},
		{nsInf.Informer(), c.handler("Namespace", namespaceChanged, nil)},
		{svcInf.Informer(), c.handler("Service", serviceChanged, nil)},
		{npInf.Informer(), c.handler("NetworkPolicy", policyChanged, deps.Metrics.PolicyChanges)},
	} {
		if _, err := reg.inf.AddEventHandler(reg.h); err != nil {
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		c.hasSynced = append(c.hasSynced, reg.inf.HasSynced)
	}
	c.lastLoop.Store(deps.Now().UnixNano())
	return c, nil
}

// Notify asks for a reconcile without a triggering object, e.g. after a
// route or link change on the node.
func (c *Controller) Notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run waits for the informers, then reconciles on every change, every
// Resync, and after a failure, until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.waitForSync(ctx); err != nil {
		return err
	}
	c.deps.Log.Info("informers synced")
	resync := time.NewTicker(c.cfg.Resync)
	defer resync.Stop()
	var retry <-chan time.Time
	for {
		c.lastLoop.Store(c.deps.Now().UnixNano())
		if err := c.syncOnce(); err != nil {
			c.deps.Log.Error("reconcile failed; retrying", "error", err.Error(), "retryIn", c.cfg.RetryDelay.String())
			retry = time.After(c.cfg.RetryDelay)
		} else {
			retry = nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
		case <-resync.C:
		case <-retry:
		}
	}
}

// waitForSync waits for the informers. Until they are synced no pod can be
// judged, so a pod interface that appears meanwhile (one that was not there
// when the agent started) is held at deny, the node's own traffic excepted,
// until the first reconcile decides. Interfaces that were there keep what
// the previous agent left pinned, or stay open as they were.
func (c *Controller) waitForSync(ctx context.Context) error {
	synced := make(chan bool, 1)
	go func() { synced <- cache.WaitForCacheSync(ctx.Done(), c.hasSynced...) }()
	start, err := c.deps.ReadHost()
	if err != nil {
		c.deps.Log.Error("reading the node's interfaces; new ones are not held before the informers sync", "error", err.Error())
	}
	for {
		select {
		case ok := <-synced:
			if !ok {
				return fmt.Errorf("informers did not sync: %w", ctx.Err())
			}
			return nil
		case <-c.wake:
			if err == nil {
				c.holdNew(start.PodInterfaces)
			}
		}
	}
}

// holdNew holds, at deny, the pod interfaces that were not there at start.
func (c *Controller) holdNew(existing map[int]bool) {
	host, err := c.deps.ReadHost()
	if err != nil {
		c.deps.Log.Error("reading the node's interfaces", "error", err.Error())
		return
	}
	var held []enforcer.Held
	for _, h := range heldInterfaces(host, nil, nodeOnly(host.HostPeers()), rules.DenyAll) {
		if !existing[h.Endpoint.Ifindex] {
			held = append(held, h)
		}
	}
	if err := c.deps.Enforcer.Hold(held); err != nil {
		c.deps.Log.Error("holding new pod interfaces", "error", err.Error())
	}
	c.noteHeld(held, "the informers have not synced yet")
}

// Ready reports whether the first reconcile has completed.
func (c *Controller) Ready() error {
	if !c.ready.Load() {
		return fmt.Errorf("first reconcile not completed")
	}
	return nil
}

// Healthy reports whether the loop has turned recently.
func (c *Controller) Healthy() error {
	last := time.Unix(0, c.lastLoop.Load())
	if age := c.deps.Now().Sub(last); age > 3*c.cfg.Resync+time.Minute {
		return fmt.Errorf("reconcile loop stuck for %s", age.Round(time.Second))
	}
	return nil
}
