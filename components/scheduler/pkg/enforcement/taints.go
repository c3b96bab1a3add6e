package enforcement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// taintStatus is the plugin's replacement for the TaintToleration filter,
// which the xila-guard-scheduler profile disables. It applies the stock
// semantics — a NoSchedule or NoExecute taint must be tolerated — with one
// exception: the pool taint <poolLabel>=<pool>:NoSchedule counts as
// tolerated by the protected pods of that pool's tenant. Tenants therefore
// need no toleration of their own, and a toleration grants nobody else
// anything, since Filter keeps every other pod off pool nodes by their
// label. The exception is NoSchedule only: a NoExecute pool taint would
// evict the tenant's pods, so the scheduler must not ignore it either.
//
// tenantPool is the pod's tenant's pool, or "" for an unprotected pod.
func (pl *Enforcement) taintStatus(logger klog.Logger, pod *corev1.Pod, node *corev1.Node, tenantPool string) *fwk.Status {
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if tenantPool != "" && t.Key == pl.settings.poolLabel && t.Value == tenantPool && t.Effect == corev1.TaintEffectNoSchedule {
			continue
		}
		if !v1helper.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, t, pl.taintComparisonOperators) {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value))
		}
	}
	return nil
}
