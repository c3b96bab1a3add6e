package admission

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// validatePodStatus judges a status write that changes a protected pod's
// addresses (the configuration sends no other): every address must lie in
// its node's pod ranges. A pod's addresses are what makes it an endpoint of
// the Services that select it; a node may write the status of its own pods
// only (NodeRestriction), but without this it could give its tenant pod
// the address of another node's pod, and send the tenant's Service traffic
// there. A node with no pod ranges (a CNI that allocates addresses itself)
// cannot be judged, and its pods' addresses are its word.
func (v *Validator) validatePodStatus(ctx context.Context, req *admissionv1.AdmissionRequest) outcome {
	if req.Operation != admissionv1.Update {
		return unexpected("request", "operation %s on pods/status; only UPDATE is judged", req.Operation)
	}
	pod := &corev1.Pod{}
	if err := decode(req.Object.Raw, pod, "Pod"); err != nil {
		return unexpected("request", "%v", err)
	}
	subject := podSubject(req.Namespace, pod)
	id, err := v.cfg.Cluster.Identity(ctx, req.Namespace)
	if err != nil {
		return deny(subject, violation{RuleLookup, guard.ReasonLookupFailed, "metadata.namespace",
			fmt.Sprintf("cannot tell whether namespace %s belongs to a tenant: %v", req.Namespace, err)})
	}
	addrs := podAddresses(pod)
	if !id.Protected || len(addrs) == 0 || pod.Spec.HostNetwork {
		return outcome{}
	}
	if pod.Spec.NodeName == "" {
		return deny(subject, violation{RulePodAddress, guard.ReasonPodAddressOutsideNode, "status.podIPs",
			fmt.Sprintf("addresses %s for a pod bound to no node", strings.Join(addrs, ", "))})
	}
	node, known := v.cfg.Cluster.Node(pod.Spec.NodeName)
	if !known {
		return deny(subject, violation{RulePodAddress, guard.ReasonNodeUnknown, "spec.nodeName",
			fmt.Sprintf("addresses %s for a pod on node %q, which is not known", strings.Join(addrs, ", "), pod.Spec.NodeName)})
	}
	ranges, err := podRanges(node)
	if err != nil {
		return deny(subject, violation{RulePodAddress, guard.ReasonPodAddressOutsideNode, "status.podIPs",
			fmt.Sprintf("node %s: %v", node.Name, err)})
	}
	if len(ranges) == 0 {
		return outcome{}
	}
	var outside []string
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || !containsAddr(ranges, ip) {
			outside = append(outside, a)
		}
	}
	if len(outside) == 0 {
		return outcome{}
	}
	cidrs := make([]string, len(ranges))
	for i, r := range ranges {
		cidrs[i] = r.String()
	}
	return deny(subject, violation{RulePodAddress, guard.ReasonPodAddressOutsideNode, "status.podIPs",
		fmt.Sprintf("addresses %s are outside the pod ranges %s of its node %s", strings.Join(outside, ", "), strings.Join(cidrs, ", "), node.Name)})
}

// podAddresses are the addresses a pod's status gives it.
func podAddresses(pod *corev1.Pod) []string {
	var out []string
	if pod.Status.PodIP != "" {
		out = append(out, pod.Status.PodIP)
	}
	for _, ip := range pod.Status.PodIPs {
		if ip.IP != "" && ip.IP != pod.Status.PodIP {
			out = append(out, ip.IP)
		}
	}
	return out
}

// podRanges are a node's pod ranges; a range that does not parse is an
// error, never a range that admits everything.
func podRanges(node *corev1.Node) ([]netip.Prefix, error) {
	cidrs := node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		cidrs = []string{node.Spec.PodCIDR}
	}
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("pod range %q: %w", c, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func containsAddr(ranges []netip.Prefix, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, r := range ranges {
		if r.Contains(ip) {
			return true
		}
	}
	return false
}
