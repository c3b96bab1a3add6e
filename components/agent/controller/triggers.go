package controller

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// handler turns informer events into pending triggers. Updates that do not
// change what the compiler reads are ignored (pod status churn, for one).
func (c *Controller) handler(kind string, changed func(old, new any) bool, counter *prometheus.CounterVec) cache.ResourceEventHandler {
	count := func(event string) {
		if counter != nil {
			counter.WithLabelValues(event).Inc()
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if isInInitialList {
				return // the first reconcile covers the initial list
			}
			count("add")
			c.enqueue(kind, obj)
		},
		UpdateFunc: func(old, new any) {
			if !changed(old, new) {
				return
			}
			count("update")
			c.enqueue(kind, new)
		},
		DeleteFunc: func(obj any) {
			count("delete")
			c.enqueue(kind, obj)
		},
	}
}

func (c *Controller) enqueue(kind string, obj any) {
	name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		name = "?"
	}
	key := kind + " " + name
	c.mu.Lock()
	if _, ok := c.pending[key]; !ok {
		c.pending[key] = trigger{kind: kind, name: name, seen: c.deps.Now()}
	}
	c.mu.Unlock()
	c.Notify()
}

// takePending returns the waiting triggers and clears them.
func (c *Controller) takePending() []trigger {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Collect(maps.Values(c.pending))
	clear(c.pending)
	return out
}

// requeue puts triggers of a failed reconcile back, keeping their first
// sighting so propagation includes the retries.
func (c *Controller) requeue(ts []trigger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ts {
		key := t.kind + " " + t.name
		if cur, ok := c.pending[key]; !ok || t.seen.Before(cur.seen) {
			c.pending[key] = t
		}
	}
}

// podChanged: what the compiler and the interface lookup read of a pod.
func podChanged(old, new any) bool {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := new.(*corev1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	return !maps.Equal(o.Labels, n.Labels) || o.Spec.NodeName != n.Spec.NodeName ||
		o.Spec.HostNetwork != n.Spec.HostNetwork || o.Status.Phase != n.Status.Phase ||
		!equality.Semantic.DeepEqual(o.Status.PodIPs, n.Status.PodIPs) ||
		!equality.Semantic.DeepEqual(containerPorts(o), containerPorts(n))
}

func containerPorts(p *corev1.Pod) [][]corev1.ContainerPort {
	out := make([][]corev1.ContainerPort, 0, len(p.Spec.Containers))
	for _, c := range p.Spec.Containers {
		out = append(out, c.Ports)
	}
	return out
}

func namespaceChanged(old, new any) bool {
	return !maps.Equal(labelsOf(old), labelsOf(new))
}

func labelsOf(obj any) map[string]string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetLabels()
	}
	return nil
}

func serviceChanged(old, new any) bool {
	o, ok1 := old.(*corev1.Service)
	n, ok2 := new.(*corev1.Service)
	if !ok1 || !ok2 {
		return true
	}
	return o.Spec.Type != n.Spec.Type || !slices.Equal(o.Spec.ClusterIPs, n.Spec.ClusterIPs) ||
		o.Spec.ClusterIP != n.Spec.ClusterIP || !slices.Equal(o.Spec.ExternalIPs, n.Spec.ExternalIPs) ||
		!equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer)
}

func policyChanged(old, new any) bool {
	o, ok1 := old.(*networkingv1.NetworkPolicy)
	n, ok2 := new.(*networkingv1.NetworkPolicy)
	if !ok1 || !ok2 {
		return true
	}
	return !equality.Semantic.DeepEqual(o.Spec, n.Spec)
}
