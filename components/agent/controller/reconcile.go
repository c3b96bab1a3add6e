package controller

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/agent/compiler"
	"github.com/xila-guard/xila-guard/components/agent/dataplane"
	"github.com/xila-guard/xila-guard/components/agent/enforcer"
)

// Event reasons the agent records on pods.
const (
	// ReasonDenyAll: the pod's policy could not be installed exactly, so
	// the pod denies all traffic in both directions.
	ReasonDenyAll = "NetworkPolicyDenyAll"
)

// syncOnce reconciles once and accounts for the triggers it covered.
func (c *Controller) syncOnce() error {
	triggers := c.takePending()
	c.deps.Metrics.Reconciles.Inc()
	if err := c.reconcile(); err != nil {
		c.deps.Metrics.ReconcileErrors.Inc()
		c.requeue(triggers)
		return err
	}
	c.ready.Store(true)
	done := c.deps.Now()
	for _, t := range triggers {
		d := done.Sub(t.seen)
		c.deps.Metrics.Propagation.WithLabelValues(t.kind).Observe(d.Seconds())
		if t.kind == "NetworkPolicy" || t.kind == "Namespace" {
			c.deps.Log.Info("change enforced", "kind", t.kind, "object", t.name, "seconds", d.Seconds())
		}
	}
	return nil
}

// reconcile compiles the node's pods from the informers' snapshot and
// syncs the dataplane. Per-pod failures are reported and make the whole
// reconcile count as failed, so it is retried.
func (c *Controller) reconcile() error {
	in, err := c.snapshot()
	if err != nil {
		return err
	}
	host, err := c.deps.ReadHost()
	if err != nil {
		return fmt.Errorf("reading the node's routes: %w", err)
	}
	comp := compiler.New(in, compiler.Options{HostPeers: host.HostPeers()})
	local, byKey, waiting, pending := c.localPods(in.Pods, host.Interface)
	compiled := make(map[types.NamespacedName]compiler.PodRules, len(local))
	for _, p := range local {
		if r, ok := comp.Pod(p.Key); ok {
			compiled[p.Key] = r
		}
	}
	var candidates []compiler.PodRules
	for _, key := range pending {
		if r, ok := comp.Pod(key); ok {
			candidates = append(candidates, r)
		}
	}
	ingress, egress := holdRules(candidates, host.HostPeers())
	held := heldInterfaces(host, local, ingress, egress)
	frontends := append(compiler.Frontends(in.Services), c.cfg.ServiceCIDRs...)
	outcomes, syncErr := c.deps.Enforcer.Sync(local, compiled, held, frontends)
	podErr := c.report(outcomes, byKey)
	c.noteHeld(held, fmt.Sprintf("%d pods of this node have no address yet", len(pending)))
	c.deps.Metrics.PodsManaged.Set(float64(len(local)))
	c.deps.Metrics.PodsWaiting.Set(float64(waiting))
	return errors.Join(syncErr, podErr)
}

func (c *Controller) snapshot() (compiler.Input, error) {
	var in compiler.Input
	var err error
	if in.Pods, err = c.pods.List(labels.Everything()); err != nil {
		return in, fmt.Errorf("listing pods: %w", err)
	}
	if in.Namespaces, err = c.namespaces.List(labels.Everything()); err != nil {
		return in, fmt.Errorf("listing namespaces: %w", err)
	}
	if in.Services, err = c.services.List(labels.Everything()); err != nil {
		return in, fmt.Errorf("listing services: %w", err)
	}
	if in.NetworkPolicies, err = c.policies.List(labels.Everything()); err != nil {
		return in, fmt.Errorf("listing network policies: %w", err)
	}
	return in, nil
}

// localPods picks the pods of this node that have their own network
// namespace and a host route, with their interface; it also counts those
// with an address but no route yet (waiting) and returns those without an
// address (pending: the owners of interfaces the agent cannot name yet).
// Two pods routed through one interface means the informer still holds a
// deleted pod whose address was reused: the newer pod owns the interface.
func (c *Controller) localPods(pods []*corev1.Pod, ifindexOf func([]netip.Addr) int) (
	local []enforcer.Pod, byKey map[types.NamespacedName]*corev1.Pod, waiting int, pending []types.NamespacedName,
) {
	byIf := map[int]*corev1.Pod{}
	addrsOf := map[*corev1.Pod][]netip.Addr{}
	for _, p := range pods {
		if p.Spec.NodeName != c.cfg.NodeName || p.Spec.HostNetwork ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		addrs := podAddrs(p)
		if len(addrs) == 0 {
			pending = append(pending, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
			continue
		}
		ifindex := ifindexOf(addrs)
		if ifindex == 0 {
			waiting++
			continue
		}
		if other, ok := byIf[ifindex]; ok {
			if other.CreationTimestamp.After(p.CreationTimestamp.Time) {
				continue
			}
		}
		byIf[ifindex] = p
		addrsOf[p] = addrs
	}
	local = make([]enforcer.Pod, 0, len(byIf))
	byKey = make(map[types.NamespacedName]*corev1.Pod, len(byIf))
	for ifindex, p := range byIf {
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		local = append(local, enforcer.Pod{Key: key, Endpoint: dataplane.Endpoint{Ifindex: ifindex, Addrs: addrsOf[p]}})
		byKey[key] = p
	}
	slices.SortFunc(local, func(a, b enforcer.Pod) int { return a.Endpoint.Ifindex - b.Endpoint.Ifindex })
	return local, byKey, waiting, pending
}

func podAddrs(p *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	if len(out) == 0 && p.Status.PodIP != "" {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// report logs what changed, records an Event the first time a pod falls
// back to deny-all (or falls back for a different reason), and returns
// the per-pod errors that are worth a retry.
func (c *Controller) report(outcomes []enforcer.Outcome, pods map[types.NamespacedName]*corev1.Pod) error {
	var retry []error
	denyAll := 0
	for _, o := range outcomes {
		if o.Changed {
			c.deps.Metrics.DataplaneUpdates.Inc()
		}
		if o.DenyAll {
			denyAll++
			msg := o.Err.Error()
			if c.denyAll[o.Pod] != msg {
				c.denyAll[o.Pod] = msg
				c.deps.Metrics.DenyAllFallbacks.Inc()
				c.deps.Log.Error("pod falls back to deny-all", "pod", o.Pod.String(), "policies", o.Policies, "error", msg)
				if p := pods[o.Pod]; p != nil && c.deps.Recorder != nil {
					c.deps.Recorder.Eventf(p, corev1.EventTypeWarning, ReasonDenyAll,
						"Xila Guard denies all traffic of this pod on node %s: %s", c.cfg.NodeName, msg)
				}
			}
			if !errors.Is(o.Err, dataplane.ErrDenyAll) && !errors.Is(o.Err, compiler.ErrInvalidPolicy) && !errors.Is(o.Err, compiler.ErrCapacity) {
				retry = append(retry, fmt.Errorf("pod %s: %w", o.Pod, o.Err))
			}
			continue
		}
		if _, was := c.denyAll[o.Pod]; was {
			delete(c.denyAll, o.Pod)
			c.deps.Log.Info("pod no longer denies all", "pod", o.Pod.String())
		}
		if o.Err != nil {
			c.deps.Log.Error("applying pod policy failed; retrying", "pod", o.Pod.String(), "policies", o.Policies, "error", o.Err.Error())
			retry = append(retry, fmt.Errorf("pod %s: %w", o.Pod, o.Err))
			continue
		}
		if o.Changed {
			c.deps.Log.Info("pod policy applied", "pod", o.Pod.String(), "policies", o.Policies, "entries", o.Entries)
		}
	}
	for k := range c.denyAll {
		if pods[k] == nil {
			delete(c.denyAll, k)
		}
	}
	c.deps.Metrics.PodsDenyAll.Set(float64(denyAll))
	return errors.Join(retry...)
}
