package admission

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// mirrorPodAnnotation marks a mirror pod: the API copy of a static pod,
// created by the kubelet of the node it runs on.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// isOwnMirrorPod reports whether a kubelet creates the mirror pod of a
// static pod on its own node. The NodeRestriction admission plugin already
// limits kubelets to that. Outside the tenants such a pod runs whatever
// the API says, so refusing its mirror only hides it; in a tenant's
// namespace its mirror is what makes it the tenant's (its labels select
// the tenant's Services), so it is judged as the tenant's placement on
// that node.
func isOwnMirrorPod(user string, pod *corev1.Pod) bool {
	_, mirror := pod.Annotations[mirrorPodAnnotation]
	return mirror && pod.Spec.NodeName != "" && user == "system:node:"+pod.Spec.NodeName
}

// protectedViolations are the rules every pod of a tenant namespace obeys,
// whatever it requests. create is false for UPDATE, where spec.nodeName
// has been set by a binding.
func (v *Validator) protectedViolations(pod *corev1.Pod, id Identity, create, ownMirror bool) []violation {
	var out []violation
	if vi, bad := v.schedulerViolation(pod); bad {
		out = append(out, vi)
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
	if v.cfg.Devices == nil {
		// Without device enforcement nothing judges the devices a claim
		// hands out: a tenant's pod may not use claims.
		for i, rc := range pod.Spec.ResourceClaims {
			out = append(out, violation{RuleClaim, guard.ReasonDeviceEnforcementOff, fmt.Sprintf("spec.resourceClaims[%d]", i),
				fmt.Sprintf("claim %q: the webhook runs without device enforcement (webhook.devices), so no device a claim hands out would be judged", rc.Name)})
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
	out = append(out, v.psa.violations(pod, podSecurityLevel(id.Policy))...)
	out = append(out, imageViolations(pod, allowedImageDigests(id.Policy))...)
	pool := ""
	if id.Tenant != nil {
		pool = id.Tenant.PoolName()
	}
	return append(out, v.foreignPoolViolations(pod, pool)...)
}

// samePlacement reports whether two versions of a pod ask for the same
// nodes: the same tolerations, node selector and node affinity.
func samePlacement(a, b *corev1.Pod) bool {
	var aa, ba *corev1.NodeAffinity
	if a.Spec.Affinity != nil {
		aa = a.Spec.Affinity.NodeAffinity
	}
	if b.Spec.Affinity != nil {
		ba = b.Spec.Affinity.NodeAffinity
	}
	return equality.Semantic.DeepEqual(a.Spec.Tolerations, b.Spec.Tolerations) &&
		equality.Semantic.DeepEqual(a.Spec.NodeSelector, b.Spec.NodeSelector) &&
		equality.Semantic.DeepEqual(aa, ba)
}

// schedulerViolation checks the scheduler a protected pod names: the
// controlled scheduler, or an external one whose orchestrator profile's
// workload selector matches the pod.
func (v *Validator) schedulerViolation(pod *corev1.Pod) (violation, bool) {
	sched := pod.Spec.SchedulerName
	if sched == guard.SchedulerName {
		return violation{}, false
	}
	if sels, ok := v.profiles[sched]; ok {
		set := labels.Set(pod.Labels)
		for _, s := range sels {
			if s.Matches(set) {
				return violation{}, false
			}
		}
		shown := make([]string, len(sels))
		for i, s := range sels {
			shown[i] = s.String()
		}
		return violation{RuleScheduler, guard.ReasonSchedulerProfileMismatch, "metadata.labels",
			fmt.Sprintf("scheduler %q places only the workloads of its orchestrator profile, and the pod's labels match none of its selectors (%s)",
				sched, strings.Join(shown, "; "))}, true
	}
	if sched == "" {
		sched = corev1.DefaultSchedulerName
	}
	return violation{RuleScheduler, guard.ReasonSchedulerNotAllowed, "spec.schedulerName",
		fmt.Sprintf("scheduler %q is not accepted for protected pods; use %s", sched, strings.Join(v.cfg.acceptedSchedulers(), " or "))}, true
}

// foreignPoolViolations are the ways a protected pod could reach another
// tenant's pool: tolerating a pool taint of another value or of any value
// (operator Exists, or a wildcard), or selecting or requiring the pool
// label with another value or with any value. Selecting or tolerating its
// own pool is allowed, and so is requiring the label to be absent. With
// no pool (the tenant is unresolved) every pool is foreign.
func (v *Validator) foreignPoolViolations(pod *corev1.Pod, pool string) []violation {
	key := v.cfg.PoolLabel
	own := pool
	if own == "" {
		own = "none: the tenant is unresolved"
	}
	var out []violation
	for i, t := range pod.Spec.Tolerations {
		if !toleratesPoolTaint(t, key) || (pool != "" && t.Key == key && t.Operator != corev1.TolerationOpExists && t.Value == pool) {
			continue
		}
		what := fmt.Sprintf("toleration of %s=%q", key, t.Value)
		switch {
		case t.Key == "":
			what = "wildcard toleration (empty key, operator Exists)"
		case t.Operator == corev1.TolerationOpExists:
			what = fmt.Sprintf("toleration of key %s with operator Exists", key)
		}
		out = append(out, violation{RuleForeignPool, guard.ReasonForeignPool, fmt.Sprintf("spec.tolerations[%d]", i),
			fmt.Sprintf("%s tolerates pools other than the tenant's own (%s); tolerate exactly %s=<the tenant's pool>:NoSchedule", what, own, key)})
	}
	if val, ok := pod.Spec.NodeSelector[key]; ok && (pool == "" || val != pool) {
		out = append(out, violation{RuleForeignPool, guard.ReasonForeignPool, "spec.nodeSelector",
			fmt.Sprintf("nodeSelector %s=%s selects a pool other than the tenant's own (%s)", key, val, own)})
	}
	for _, term := range requiredTerms(pod) {
		for j, e := range term.terms.MatchExpressions {
			if e.Key != key || e.Operator == corev1.NodeSelectorOpDoesNotExist ||
				(pool != "" && e.Operator == corev1.NodeSelectorOpIn && !slices.ContainsFunc(e.Values, func(s string) bool { return s != pool })) {
				continue
			}
			out = append(out, violation{RuleForeignPool, guard.ReasonForeignPool, fmt.Sprintf("%s.matchExpressions[%d]", term.path, j),
				fmt.Sprintf("required node affinity %s %s %v can select a pool other than the tenant's own (%s)", key, e.Operator, e.Values, own)})
		}
	}
	return out
}

// allowedImageDigests is the policy's image allow-list; nil when it has
// none, and every image is allowed.
func allowedImageDigests(p *wire.Policy) []string {
	if p == nil || p.Spec.ConfidentialComputing == nil {
		return nil
	}
	return p.Spec.ConfidentialComputing.AllowedImageDigests
}

// imageViolations holds every image a pod runs or mounts to the policy's
// image allow-list: named by digest (name@sha256:<64 hex>), and the digest
// listed. A tag next to the digest is allowed, as the container runtime
// pulls by the digest alone.
func imageViolations(pod *corev1.Pod, allowed []string) []violation {
	if len(allowed) == 0 {
		return nil
	}
	var out []violation
	for _, im := range images(pod) {
		at := strings.LastIndexByte(im.ref, '@')
		digest := im.ref[at+1:]
		switch {
		case at < 0 || !v1alpha1.IsImageDigest(digest):
			out = append(out, violation{RuleImages, guard.ReasonImageNotPinned, im.path,
				fmt.Sprintf("%s %q, named by tag; the policy allows images by sha256 digest only (name@sha256:<64 hex>)", im.what, im.ref)})
		case !slices.Contains(allowed, digest):
			out = append(out, violation{RuleImages, guard.ReasonImageNotAllowed, im.path,
				fmt.Sprintf("%s digest %s, which is not among the %d allowedImageDigests of the policy", im.what, digest, len(allowed))})
		}
	}
	return out
}

// imageRef is one image a pod runs or mounts, with its field and how to
// name it to a person.
type imageRef struct {
	ref, path, what string
}

// images lists the images of every container list and every image volume
// (spec.volumes[].image, whose files a container reads like its own).
func images(pod *corev1.Pod) []imageRef {
	var out []imageRef
	for _, c := range containers(pod) {
		out = append(out, imageRef{c.image, c.path + ".image", fmt.Sprintf("container %q runs image", c.name)})
	}
	for i, vol := range pod.Spec.Volumes {
		if vol.Image != nil {
			out = append(out, imageRef{vol.Image.Reference, fmt.Sprintf("spec.volumes[%d].image.reference", i), fmt.Sprintf("volume %q mounts image", vol.Name)})
		}
	}
	return out
}

// containerInfo is what the rules need from any kind of container.
type containerInfo struct {
	name, path, image string
	privileged        bool
}

// containers lists init, regular and ephemeral containers alike.
func containers(pod *corev1.Pod) []containerInfo {
	var out []containerInfo
	add := func(list string, i int, name, image string, sc *corev1.SecurityContext) {
		out = append(out, containerInfo{
			name: name, path: fmt.Sprintf("spec.%s[%d]", list, i), image: image,
			privileged: sc != nil && sc.Privileged != nil && *sc.Privileged,
		})
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		add("initContainers", i, c.Name, c.Image, c.SecurityContext)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		add("containers", i, c.Name, c.Image, c.SecurityContext)
	}
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i]
		add("ephemeralContainers", i, c.Name, c.Image, c.SecurityContext)
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
