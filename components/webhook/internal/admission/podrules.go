package admission

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// mirrorPodAnnotation marks a mirror pod: the API copy of a static pod,
// created by the kubelet of the node it runs on.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// isOwnMirrorPod reports whether a kubelet creates the mirror pod of a
// static pod on its own node. The NodeRestriction admission plugin already
// limits kubelets to that; such a pod runs whatever the API says, so
// refusing its mirror only hides it.
func isOwnMirrorPod(user string, pod *corev1.Pod) bool {
	_, mirror := pod.Annotations[mirrorPodAnnotation]
	return mirror && pod.Spec.NodeName != "" && user == "system:node:"+pod.Spec.NodeName
}

// protectedViolations are the rules every pod of a tenant namespace obeys,
// whatever it requests. create is false for UPDATE, where spec.nodeName
// has been set by a binding.
func (v *Validator) protectedViolations(pod *corev1.Pod, create, ownMirror bool) []violation {
	var out []violation
	if sched := pod.Spec.SchedulerName; !slices.Contains(v.cfg.acceptedSchedulers(), sched) {
		if sched == "" {
			sched = corev1.DefaultSchedulerName
		}
		out = append(out, violation{RuleScheduler, guard.ReasonSchedulerNotAllowed, "spec.schedulerName",
			fmt.Sprintf("scheduler %q is not accepted for protected pods; use %s", sched, strings.Join(v.cfg.acceptedSchedulers(), " or "))})
	}
	if create && pod.Spec.NodeName != "" && !ownMirror {
		out = append(out, violation{RuleNodeName, guard.ReasonNodeNameSet, "spec.nodeName",
			fmt.Sprintf("spec.nodeName %q bypasses the scheduler; protected pods are placed by %s", pod.Spec.NodeName, guard.SchedulerName)})
	}
	for _, c := range containers(pod) {
		if c.privileged {
			out = append(out, violation{RulePrivileged, guard.ReasonPrivilegedContainer, c.path + ".securityContext.privileged",
				fmt.Sprintf("container %q (%s) is privileged", c.name, c.path)})
		}
	}
	if pod.Spec.HostNetwork {
		out = append(out, violation{RuleHostNamespaces, guard.ReasonHostNetwork, "spec.hostNetwork", "hostNetwork shares the node's network namespace"})
	}
	if pod.Spec.HostPID {
		out = append(out, violation{RuleHostNamespaces, guard.ReasonHostPID, "spec.hostPID", "hostPID shares the node's process namespace"})
	}
	if pod.Spec.HostIPC {
		out = append(out, violation{RuleHostNamespaces, guard.ReasonHostIPC, "spec.hostIPC", "hostIPC shares the node's IPC namespace"})
	}
	for i, vol := range pod.Spec.Volumes {
		if vol.HostPath != nil {
			out = append(out, violation{RuleHostPath, guard.ReasonHostPathVolume, fmt.Sprintf("spec.volumes[%d].hostPath", i),
				fmt.Sprintf("volume %q mounts host path %q", vol.Name, vol.HostPath.Path)})
		}
	}
	return out
}

// containerInfo is what the rules need from any kind of container.
type containerInfo struct {
	name, path string
	privileged bool
}

// containers lists init, regular and ephemeral containers alike.
func containers(pod *corev1.Pod) []containerInfo {
	var out []containerInfo
	add := func(list string, i int, name string, sc *corev1.SecurityContext) {
		out = append(out, containerInfo{
			name: name, path: fmt.Sprintf("spec.%s[%d]", list, i),
			privileged: sc != nil && sc.Privileged != nil && *sc.Privileged,
		})
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		add("initContainers", i, c.Name, c.SecurityContext)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		add("containers", i, c.Name, c.SecurityContext)
	}
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i]
		add("ephemeralContainers", i, c.Name, c.SecurityContext)
	}
	return out
}

// poolViolations are the ways a pod outside every tenant could reach a
// pool node: tolerating the pool taint, selecting or requiring the pool
// label, or naming a pool node.
func (v *Validator) poolViolations(pod *corev1.Pod, ownMirror bool) []violation {
	key := v.cfg.PoolLabel
	var out []violation
	for i, t := range pod.Spec.Tolerations {
		if !toleratesPoolTaint(t, key) {
			continue
		}
		what := fmt.Sprintf("toleration of key %q", t.Key)
		if t.Key == "" {
			what = "wildcard toleration (empty key, operator Exists)"
		}
		out = append(out, violation{RulePoolToleration, guard.ReasonPoolToleration, fmt.Sprintf("spec.tolerations[%d]", i),
			what + " tolerates the pool taint " + key})
	}
	if _, ok := pod.Spec.NodeSelector[key]; ok {
		out = append(out, violation{RulePoolSelector, guard.ReasonPoolSelector, "spec.nodeSelector",
			fmt.Sprintf("nodeSelector selects the pool label %s", key)})
	}
	for _, term := range requiredTerms(pod) {
		for j, e := range term.terms.MatchExpressions {
			if e.Key == key && requiresLabel(e.Operator) {
				out = append(out, violation{RulePoolSelector, guard.ReasonPoolSelector, fmt.Sprintf("%s.matchExpressions[%d]", term.path, j),
					fmt.Sprintf("required node affinity %s %s selects pool nodes", key, e.Operator)})
			}
		}
		for j, f := range term.terms.MatchFields {
			if f.Key != "metadata.name" || f.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			for _, name := range f.Values {
				if vi, bad := v.nodeViolation(name, fmt.Sprintf("%s.matchFields[%d]", term.path, j), "required node affinity names"); bad {
					out = append(out, vi)
				}
			}
		}
	}
	if pod.Spec.NodeName != "" && !ownMirror {
		if vi, bad := v.nodeViolation(pod.Spec.NodeName, "spec.nodeName", "spec.nodeName names"); bad {
			out = append(out, vi)
		}
	}
	return out
}

// nodeViolation checks a node a pod names: a pool node, or one the webhook
// does not know, is refused.
func (v *Validator) nodeViolation(name, field, how string) (violation, bool) {
	node, ok := v.cfg.Cluster.Node(name)
	if !ok {
		return violation{RulePoolNodeName, guard.ReasonNodeUnknown, field,
			fmt.Sprintf("%s node %q, which is not known, so it may be a pool node", how, name)}, true
	}
	if pool, inPool := node.Labels[v.cfg.PoolLabel]; inPool {
		return violation{RulePoolNodeName, guard.ReasonPoolNodeName, field,
			fmt.Sprintf("%s node %q of pool %q", how, name, pool)}, true
	}
	return violation{}, false
}

// toleratesPoolTaint reports whether t tolerates the pool's NoSchedule
// taint, whatever the pool: a toleration of its key, or a wildcard (empty
// key, operator Exists), with no effect or NoSchedule.
func toleratesPoolTaint(t corev1.Toleration, key string) bool {
	if t.Effect != "" && t.Effect != corev1.TaintEffectNoSchedule {
		return false
	}
	if t.Key == "" {
		return t.Operator == corev1.TolerationOpExists
	}
	return t.Key == key
}

// requiresLabel reports whether a match expression with this operator can
// only be met by nodes that carry the label.
func requiresLabel(op corev1.NodeSelectorOperator) bool {
	switch op {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		return true
	}
	return false
}

// nodeSelectorTerm is one term of a required node affinity, with its path.
type nodeSelectorTerm struct {
	path  string
	terms corev1.NodeSelectorTerm
}

func requiredTerms(pod *corev1.Pod) []nodeSelectorTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	ts := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	out := make([]nodeSelectorTerm, len(ts))
	for i, t := range ts {
		out[i] = nodeSelectorTerm{
			path:  fmt.Sprintf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d]", i),
			terms: t,
		}
	}
	return out
}
