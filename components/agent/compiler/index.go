package compiler

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// namespaceNameLabel is set by the API server on every namespace; inputs
// built by hand may lack it, so the compiler adds it.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// podInfo is what the compiler needs of a pod, computed once.
type podInfo struct {
	key    types.NamespacedName
	labels labels.Set
	// ips are the addresses by which the pod is a policy peer; empty when
	// it cannot be one (no address yet, host network, or finished).
	ips   []netip.Addr
	ports []corev1.ContainerPort
}

func newPodInfo(p *corev1.Pod) *podInfo {
	info := &podInfo{
		key:    types.NamespacedName{Namespace: p.Namespace, Name: p.Name},
		labels: labels.Set(p.Labels),
	}
	for _, c := range p.Spec.Containers {
		info.ports = append(info.ports, c.Ports...)
	}
	// A host-network pod shares the node's address with everything else on
	// the node, so selecting it must not allow the node; finished pods
	// hold no address that is theirs any more.
	if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return info
	}
	seen := map[netip.Addr]bool{}
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && !seen[a.Unmap()] {
			seen[a.Unmap()] = true
			info.ips = append(info.ips, a.Unmap())
		}
	}
	for _, ip := range p.Status.PodIPs {
		add(ip.IP)
	}
	if p.Status.PodIP != "" {
		add(p.Status.PodIP)
	}
	return info
}

// resolveNamed returns the numbers of the pod's container ports called name
// with protocol proto; none when the pod has no such port.
func (p *podInfo) resolveNamed(np namedPort) []uint16 {
	var out []uint16
	for _, cp := range p.ports {
		proto := cp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if cp.Name == np.name && proto == np.proto && cp.ContainerPort > 0 && cp.ContainerPort <= 65535 {
			out = append(out, uint16(cp.ContainerPort))
		}
	}
	return out
}

// index holds the cluster state in the shapes selection needs.
type index struct {
	pods        map[types.NamespacedName]*podInfo
	byNamespace map[string][]*podInfo // sorted by name
	nsLabels    map[string]labels.Set
	namespaces  []string // sorted
	nsSelected  map[string][]string
}

func newIndex(in Input) *index {
	ix := &index{
		pods:        make(map[types.NamespacedName]*podInfo, len(in.Pods)),
		byNamespace: map[string][]*podInfo{},
		nsLabels:    map[string]labels.Set{},
		nsSelected:  map[string][]string{},
	}
	for _, ns := range in.Namespaces {
		l := labels.Set{}
		for k, v := range ns.Labels {
			l[k] = v
		}
		if _, ok := l[namespaceNameLabel]; !ok {
			l[namespaceNameLabel] = ns.Name
		}
		ix.nsLabels[ns.Name] = l
	}
	for _, p := range in.Pods {
		info := newPodInfo(p)
		ix.pods[info.key] = info
		ix.byNamespace[p.Namespace] = append(ix.byNamespace[p.Namespace], info)
		if _, ok := ix.nsLabels[p.Namespace]; !ok {
			ix.nsLabels[p.Namespace] = labels.Set{namespaceNameLabel: p.Namespace}
		}
	}
	for ns, pods := range ix.byNamespace {
		slices.SortFunc(pods, func(a, b *podInfo) int { return compareString(a.key.Name, b.key.Name) })
		ix.byNamespace[ns] = pods
	}
	for ns := range ix.nsLabels {
		ix.namespaces = append(ix.namespaces, ns)
	}
	slices.Sort(ix.namespaces)
	return ix
}

// selectNamespaces returns the namespaces sel matches, memoized because many
// policies share a selector.
func (ix *index) selectNamespaces(sel labels.Selector) []string {
	key := sel.String()
	if got, ok := ix.nsSelected[key]; ok {
		return got
	}
	var out []string
	for _, ns := range ix.namespaces {
		if sel.Matches(ix.nsLabels[ns]) {
			out = append(out, ns)
		}
	}
	ix.nsSelected[key] = out
	return out
}

// selectPeers returns the pods a selector peer of a policy in namespace ns
// matches, in a stable order, that can be peers at all.
func (ix *index) selectPeers(p peer, ns string) []*podInfo {
	namespaces := []string{ns}
	if p.namespaces != nil {
		namespaces = ix.selectNamespaces(p.namespaces)
	}
	var out []*podInfo
	for _, n := range namespaces {
		for _, pod := range ix.byNamespace[n] {
			if len(pod.ips) > 0 && (p.pods == nil || p.pods.Matches(pod.labels)) {
				out = append(out, pod)
			}
		}
	}
	return out
}

// eligible returns every pod that can be a peer.
func (ix *index) eligible() []*podInfo {
	var out []*podInfo
	for _, ns := range ix.namespaces {
		for _, pod := range ix.byNamespace[ns] {
			if len(pod.ips) > 0 {
				out = append(out, pod)
			}
		}
	}
	return out
}

func compareString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
