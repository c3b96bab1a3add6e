package enforcement

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// refreshGap is how far a publisher's routine refresh may move observedAt
// (or an attestation's verifiedAt) without waking pods: a refresh that only
// confirms fresh evidence changes no decision, while one after a longer
// silence may end EVIDENCE_STALE or ATTESTATION_STALE.
const refreshGap = time.Minute

// activator wakes the pods a change may help. The guard kinds and the
// namespaces are not cluster events the scheduling queue knows, so the
// plugin watches them itself and moves the pending pods of the affected
// namespaces back to the active queue — only after its own cache holds the
// change, so the retry sees it.
type activator struct {
	pods    podActivator
	caches  *caches
	profile string
	logger  klog.Logger
}

// podActivator is the part of the framework handle the activator uses.
type podActivator interface {
	Activate(logger klog.Logger, pods map[string]*corev1.Pod)
}

func newActivator(ctx context.Context, pods podActivator, c *caches, profile string) *activator {
	return &activator{pods: pods, caches: c, profile: profile, logger: klog.FromContext(ctx).WithName(Name)}
}

// pending reports whether this profile still has to place the pod.
func (a *activator) pending(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && pod.Spec.SchedulerName == a.profile
}

// wake activates the pending pods of the namespaces.
func (a *activator) wake(namespaces sets.Set[string], why string) {
	batch := map[string]*corev1.Pod{}
	for ns := range namespaces {
		pods, err := a.caches.pods.Pods(ns).List(everything)
		if err != nil {
			continue
		}
		for _, p := range pods {
			if a.pending(p) {
				batch[cache.MetaObjectToName(p).String()] = p
			}
		}
	}
	if len(batch) > 0 {
		a.logger.V(4).Info("Waking pending pods", "reason", why, "pods", len(batch))
		a.pods.Activate(a.logger, batch)
	}
}

// stateHandler wakes the tenants of a node's pool when its evidence changes.
func (a *activator) stateHandler() cache.ResourceEventHandler {
	wake := func(s *v1alpha1.NodeSecurityState) {
		pool := s.Labels[guard.LabelTenantPool]
		if n, err := a.caches.nodes.Get(s.Name); err == nil {
			pool = n.Labels[a.caches.poolLabel]
		}
		if pool != "" {
			a.wake(a.caches.namespacesOfPool(pool), "NodeSecurityState "+s.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*v1alpha1.NodeSecurityState); ok {
				wake(s)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1alpha1.NodeSecurityState)
			n, ok2 := newObj.(*v1alpha1.NodeSecurityState)
			if ok1 && ok2 && evidenceChanged(&o.Spec, &n.Spec) {
				wake(n)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := unwrap[*v1alpha1.NodeSecurityState](obj); ok {
				wake(s)
			}
		},
	}
}

// bindingHandler wakes the namespaces a TenantBinding claims, before and
// after the change.
func (a *activator) bindingHandler() cache.ResourceEventHandler {
	wake := func(bs ...*v1alpha1.TenantBinding) {
		out := sets.New[string]()
		for _, b := range bs {
			if b != nil {
				a.caches.namespacesOfTenant(out, b, b.Spec.TenantID)
			}
		}
		a.wake(out, "TenantBinding")
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			b, _ := obj.(*v1alpha1.TenantBinding)
			wake(b)
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := oldObj.(*v1alpha1.TenantBinding)
			n, _ := newObj.(*v1alpha1.TenantBinding)
			if o != nil && n != nil && o.Generation == n.Generation {
				return // status only
			}
			wake(o, n)
		},
		DeleteFunc: func(obj any) {
			b, _ := unwrap[*v1alpha1.TenantBinding](obj)
			wake(b)
		},
	}
}

// policyHandler wakes the namespaces a PlacementPolicy governs.
func (a *activator) policyHandler() cache.ResourceEventHandler {
	wake := func(p *v1alpha1.PlacementPolicy) {
		if p != nil {
			a.wake(a.caches.namespacesOfPolicy(p.Name), "PlacementPolicy "+p.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			p, _ := obj.(*v1alpha1.PlacementPolicy)
			wake(p)
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := oldObj.(*v1alpha1.PlacementPolicy)
			n, _ := newObj.(*v1alpha1.PlacementPolicy)
			if o != nil && n != nil && o.Generation != n.Generation {
				wake(n)
			}
		},
		DeleteFunc: func(obj any) {
			p, _ := unwrap[*v1alpha1.PlacementPolicy](obj)
			wake(p)
		},
	}
}

// namespaceHandler wakes a namespace whose tenant label or policy
// annotation changed. A new namespace has no pods yet.
func (a *activator) namespaceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Namespace)
			n, ok2 := newObj.(*corev1.Namespace)
			if !ok1 || !ok2 {
				return
			}
			if o.Labels[guard.LabelTenant] != n.Labels[guard.LabelTenant] ||
				o.Annotations[guard.AnnotationPolicy] != n.Annotations[guard.AnnotationPolicy] {
				a.wake(sets.New(n.Name), "namespace "+n.Name)
			}
		},
	}
}

// evidenceChanged reports whether an update of a NodeSecurityState can
// change a decision: anything but a routine refresh of its timestamps.
func evidenceChanged(o, n *v1alpha1.NodeSecurityStateSpec) bool {
	if moved(o.ObservedAt, n.ObservedAt) {
		return true
	}
	oa, na := attestation(o), attestation(n)
	if oa != nil && na != nil && moved(oa.VerifiedAt, na.VerifiedAt) {
		return true
	}
	a, b := o.DeepCopy(), n.DeepCopy()
	a.ObservedAt = b.ObservedAt
	if oa != nil && na != nil {
		attestation(a).VerifiedAt = na.VerifiedAt
	}
	return !equality.Semantic.DeepEqual(a, b)
}

func moved(o, n metav1.Time) bool {
	d := n.Sub(o.Time)
	return d > refreshGap || d < 0
}

func attestation(s *v1alpha1.NodeSecurityStateSpec) *v1alpha1.Attestation {
	if s.TEE == nil {
		return nil
	}
	return s.TEE.Attestation
}

// unwrap returns the object of a delete event, which may be a tombstone.
func unwrap[T any](obj any) (T, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}
