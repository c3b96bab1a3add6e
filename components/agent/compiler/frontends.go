package compiler

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Frontends returns every address a Service answers on that kube-proxy
// rewrites to an endpoint on the node — cluster IPs, external IPs and
// load-balancer IPs — as single-address prefixes, sorted and deduplicated.
//
// A pod's egress to these addresses cannot be judged before the rewrite,
// so the dataplane defers it to after DNAT, where the endpoint is known.
func Frontends(services []*corev1.Service) []netip.Prefix {
	seen := map[netip.Addr]bool{}
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil {
			seen[a.Unmap()] = true
		}
	}
	for _, svc := range services {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		for _, ip := range svc.Spec.ClusterIPs {
			add(ip) // "None" of a headless service does not parse
		}
		add(svc.Spec.ClusterIP)
		for _, ip := range svc.Spec.ExternalIPs {
			add(ip)
		}
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			add(ing.IP)
		}
	}
	out := make([]netip.Prefix, 0, len(seen))
	for a := range seen {
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}
