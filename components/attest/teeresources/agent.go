package teeresources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Defaults of the Agent.
const (
	// DefaultResync is how often the agent reads its node and evidence
	// again besides when the evidence changes: it catches a node whose
	// capacity someone else changed, and a re-created node.
	DefaultResync = time.Minute
	// retryInterval is how soon a failed sync is tried again.
	retryInterval = time.Second
	// shutdownTimeout bounds the last write, the EPC capacity set to 0.
	shutdownTimeout = 5 * time.Second
)

// afterRegistration are the times, after each registration of the
// device plugin, at which the agent checks its node's capacity again: a
// kubelet that starts without its device-plugin checkpoint (a rebooted or
// re-created node) sets every extended resource to 0 while registering
// the node, which may come after the agent's own patch.
var afterRegistration = []time.Duration{time.Second, 3 * time.Second, 10 * time.Second, 30 * time.Second}

// Agent keeps its node's TEE resources in step with the node's evidence:
// the EPC capacity of the node's status and the health of the enclave
// devices.
type Agent struct {
	// Node is the name of the agent's node, and of its NodeSecurityState.
	Node string
	// Client patches the node's status; it reads the node too when Live
	// is nil.
	Client client.Client
	// Live reads the node from the API server (no cache: the agent may
	// only get its node).
	Live client.Reader
	// States reads the node's NodeSecurityState, e.g. from a cache that
	// watches it by name; Client when nil.
	States client.Reader
	// Accepted are the evidence sources whose EPC size is advertised;
	// DefaultAcceptedSources when empty.
	Accepted []v1alpha1.EvidenceSource
	// Plugin is the enclave device plugin whose health follows the
	// evidence; Run runs it.
	Plugin *Plugin
	// Resync is how often the node and evidence are read again;
	// DefaultResync when zero.
	Resync time.Duration
	// Log receives what the agent does; nil discards.
	Log *slog.Logger
	// Metrics are updated when set.
	Metrics *Metrics

	once  sync.Once
	kick  chan struct{}
	mu    sync.Mutex
	force bool
	last  string
}

// Offer is what the node advertises after a sync.
type Offer struct {
	// EPC is the sgx.intel.com/epc capacity in bytes.
	EPC int64
	// Healthy says whether the enclave devices are healthy.
	Healthy bool
	// Why says why nothing is offered; empty when something is.
	Why string
	// Patched says whether the node's status was written.
	Patched bool
}

func (a *Agent) init() {
	a.once.Do(func() { a.kick = make(chan struct{}, 1) })
}

// Kick asks for a sync soon; force makes it patch the node's capacity even
// when it looks right.
func (a *Agent) Kick(force bool) {
	a.init()
	if force {
		a.mu.Lock()
		a.force = true
		a.mu.Unlock()
	}
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Registered is the device plugin's hook: every registration, the first
// and those after a kubelet restart, patches the capacity again at once and
// checks it a few times after.
func (a *Agent) Registered() {
	a.Metrics.registered()
	a.Kick(true)
	for _, d := range afterRegistration {
		time.AfterFunc(d, func() { a.Kick(false) })
	}
}

// Run runs the device plugin and keeps the node's resources in step until
// ctx ends; it then sets the EPC capacity to 0, since nothing keeps it in
// step any longer.
func (a *Agent) Run(ctx context.Context) error {
	a.init()
	if a.Node == "" {
		return errors.New("the agent needs its node's name")
	}
	plugin := make(chan error, 1)
	if a.Plugin != nil {
		if a.Plugin.Registered == nil {
			a.Plugin.Registered = a.Registered
		}
		go func() { plugin <- a.Plugin.Run(ctx) }()
	}
	resync := time.NewTicker(a.resync())
	defer resync.Stop()
	a.Kick(true)
	for {
		select {
		case <-ctx.Done():
			return a.shutdown(ctx)
		case err := <-plugin:
			if ctx.Err() != nil {
				return a.shutdown(ctx)
			}
			_ = a.shutdown(ctx)
			return fmt.Errorf("the enclave device plugin stopped: %w", err)
		case <-a.kick:
		case <-resync.C:
		}
		a.mu.Lock()
		force := a.force
		a.force = false
		a.mu.Unlock()
		if _, err := a.Sync(ctx, force); err != nil {
			if ctx.Err() != nil {
				continue
			}
			a.log().Warn("syncing the TEE resources failed; retrying", "node", a.Node, "err", err.Error())
			time.AfterFunc(retryInterval, func() { a.Kick(force) })
		}
	}
}

func (a *Agent) shutdown(ctx context.Context) error {
	if a.Plugin != nil {
		a.Plugin.SetHealthy(false)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	node := &corev1.Node{}
	if err := a.live().Get(sctx, client.ObjectKey{Name: a.Node}, node); err != nil {
		return fmt.Errorf("reading node %s to withdraw its EPC: %w", a.Node, err)
	}
	if err := a.patch(sctx, node, 0); err != nil {
		return fmt.Errorf("withdrawing the EPC of node %s: %w", a.Node, err)
	}
	a.Metrics.offered(0, false)
	a.log().Info("stopped: EPC capacity withdrawn", "node", a.Node)
	return nil
}

// Sync reads the node and its evidence once, sets the devices' health and
// patches the node's EPC capacity when it differs from what the evidence
// allows, or when force is set.
func (a *Agent) Sync(ctx context.Context, force bool) (Offer, error) {
	node := &corev1.Node{}
	if err := a.live().Get(ctx, client.ObjectKey{Name: a.Node}, node); err != nil {
		return Offer{}, fmt.Errorf("reading node %s: %w", a.Node, err)
	}
	var nss *v1alpha1.NodeSecurityState
	state := &v1alpha1.NodeSecurityState{}
	switch err := a.states().Get(ctx, client.ObjectKey{Name: a.Node}, state); {
	case err == nil:
		nss = state
	case !apierrors.IsNotFound(err):
		return Offer{}, fmt.Errorf("reading the NodeSecurityState of node %s: %w", a.Node, err)
	}
	o := Offer{}
	o.EPC, o.Why = Qualify(node, nss, a.accepted())
	if o.EPC > 0 && a.Plugin != nil && !a.Plugin.DeviceAvailable() {
		o.EPC, o.Why = 0, "the host has no "+EnclaveDevice
	}
	o.Healthy = o.EPC > 0
	if a.Plugin != nil {
		a.Plugin.SetHealthy(o.Healthy)
	}
	if force || !advertises(node, o.EPC) {
		if err := a.patch(ctx, node, o.EPC); err != nil {
			return o, fmt.Errorf("patching the capacity of node %s: %w", a.Node, err)
		}
		o.Patched = true
	}
	a.Metrics.offered(o.EPC, o.Healthy)
	if summary := fmt.Sprintf("%d/%s", o.EPC, o.Why); summary != a.last {
		a.last = summary
		if o.EPC > 0 {
			a.log().Info("the evidence qualifies: advertising SGX resources", "node", a.Node,
				string(ResourceEPC), o.EPC, string(ResourceEnclave), a.enclaves())
		} else {
			a.log().Info("the evidence does not qualify: no SGX resources advertised", "node", a.Node, "why", o.Why)
		}
	}
	return o, nil
}

// advertises says whether the node's status already shows size as its EPC
// capacity and allocatable.
func advertises(node *corev1.Node, size int64) bool {
	for _, l := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		q, ok := l[ResourceEPC]
		if !ok || q.Cmp(*resource.NewQuantity(size, resource.DecimalSI)) != 0 {
			return false
		}
	}
	return true
}

// CapacityPatch is the merge patch of nodes/status that sets the EPC
// capacity, and the allocatable the kubelet would copy from it at its next
// status update, to size bytes.
func CapacityPatch(size int64) []byte {
	q := resource.NewQuantity(size, resource.DecimalSI).String()
	data, _ := json.Marshal(map[string]any{"status": map[string]any{
		"capacity":    map[corev1.ResourceName]string{ResourceEPC: q},
		"allocatable": map[corev1.ResourceName]string{ResourceEPC: q},
	}})
	return data
}

func (a *Agent) patch(ctx context.Context, node *corev1.Node, size int64) error {
	err := a.Client.Status().Patch(ctx, node, client.RawPatch(types.MergePatchType, CapacityPatch(size)))
	a.Metrics.patched(err)
	if err == nil {
		a.log().Info("patched the node's EPC capacity", "node", a.Node, string(ResourceEPC), size)
	}
	return err
}

func (a *Agent) enclaves() int {
	if a.Plugin == nil {
		return 0
	}
	return a.Plugin.Count
}

func (a *Agent) live() client.Reader {
	if a.Live != nil {
		return a.Live
	}
	return a.Client
}

func (a *Agent) states() client.Reader {
	if a.States != nil {
		return a.States
	}
	return a.Client
}

func (a *Agent) accepted() []v1alpha1.EvidenceSource {
	if len(a.Accepted) == 0 {
		return DefaultAcceptedSources
	}
	return a.Accepted
}

func (a *Agent) resync() time.Duration {
	if a.Resync <= 0 {
		return DefaultResync
	}
	return a.Resync
}

func (a *Agent) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}

// Metrics of the agent.
type Metrics struct {
	epc           prometheus.Gauge
	healthy       prometheus.Gauge
	registrations prometheus.Counter
	patches       *prometheus.CounterVec
}

// NewMetrics registers the agent's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		epc: prometheus.NewGauge(prometheus.GaugeOpts{Name: "xila_guard_attest_tee_epc_bytes",
			Help: "The sgx.intel.com/epc capacity the agent advertises for its node, in bytes."}),
		healthy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "xila_guard_attest_tee_enclave_healthy",
			Help: "1 while the sgx.intel.com/enclave devices are healthy, 0 otherwise."}),
		registrations: prometheus.NewCounter(prometheus.CounterOpts{Name: "xila_guard_attest_tee_plugin_registrations_total",
			Help: "Registrations of the enclave device plugin with the kubelet: the first, and one after each kubelet restart."}),
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xila_guard_attest_tee_capacity_patches_total",
			Help: "Patches of the node's EPC capacity, by result (ok, error)."}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.epc, m.healthy, m.registrations, m.patches} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) offered(epc int64, healthy bool) {
	if m == nil {
		return
	}
	m.epc.Set(float64(epc))
	h := 0.0
	if healthy {
		h = 1
	}
	m.healthy.Set(h)
}

func (m *Metrics) registered() {
	if m != nil {
		m.registrations.Inc()
	}
}

func (m *Metrics) patched(err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.patches.WithLabelValues(result).Inc()
}
