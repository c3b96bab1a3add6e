package compiler

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// Compiler compiles the policies of one cluster snapshot. It caches what
// pods share (resolved peers, whole rule sets of pods selected by the same
// policies), so compiling every pod costs little more than compiling one.
// A Compiler is not safe for concurrent use.
type Compiler struct {
	opts        Options
	ix          *index
	policies    []*policy
	byNamespace map[string][]int
	resolved    map[ruleRef]*resolvedRule
	results     map[string]result
}

type ruleRef struct {
	rule   *rule
	egress bool
}

type result struct {
	rs  rules.RuleSet
	err error
}

// New indexes a cluster snapshot for compilation.
func New(in Input, opts Options) *Compiler {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxPortRanges <= 0 {
		opts.MaxPortRanges = DefaultMaxPortRanges
	}
	c := &Compiler{
		opts:        opts,
		ix:          newIndex(in),
		byNamespace: map[string][]int{},
		resolved:    map[ruleRef]*resolvedRule{},
		results:     map[string]result{},
	}
	nps := slices.Clone(in.NetworkPolicies)
	slices.SortFunc(nps, func(a, b *networkingv1.NetworkPolicy) int {
		return compareString(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, np := range nps {
		c.byNamespace[np.Namespace] = append(c.byNamespace[np.Namespace], len(c.policies))
		c.policies = append(c.policies, parsePolicy(np))
	}
	return c
}

// All compiles every pod of the snapshot, sorted by namespace and name.
func (c *Compiler) All() []PodRules {
	out := make([]PodRules, 0, len(c.ix.pods))
	for _, ns := range c.ix.namespaces {
		for _, pod := range c.ix.byNamespace[ns] {
			out = append(out, c.compile(pod))
		}
	}
	return out
}

// Pod compiles one pod; ok is false when the snapshot has no such pod.
func (c *Compiler) Pod(key types.NamespacedName) (rules PodRules, ok bool) {
	info, ok := c.ix.pods[key]
	if !ok {
		return PodRules{}, false
	}
	return c.compile(info), true
}

func (c *Compiler) compile(pod *podInfo) PodRules {
	out := PodRules{Pod: pod.key, Ingress: rules.AllowAll, Egress: rules.AllowAll}
	var ingress, egress []int
	var errs []error
	for _, i := range c.byNamespace[pod.key.Namespace] {
		p := c.policies[i]
		if p.selector != nil && !p.selector.Matches(pod.labels) {
			continue
		}
		out.Policies = append(out.Policies, p.name)
		switch {
		case p.err != nil:
			errs = append(errs, p.err)
		default:
			if p.ingress {
				ingress = append(ingress, i)
			}
			if p.egress {
				egress = append(egress, i)
			}
		}
	}
	if len(errs) > 0 {
		return out.denyAll(errors.Join(errs...))
	}
	var err error
	if out.Ingress, err = c.direction(ingress, false, pod); err != nil {
		return out.denyAll(fmt.Errorf("ingress: %w", err))
	}
	if out.Egress, err = c.direction(egress, true, pod); err != nil {
		return out.denyAll(fmt.Errorf("egress: %w", err))
	}
	return out
}

// direction compiles the union of the given policies for one direction of
// pod. Pods selected by the same policies share the result, unless ingress
// named ports make it depend on the pod's own containers.
func (c *Compiler) direction(policies []int, egress bool, pod *podInfo) (rules.RuleSet, error) {
	if len(policies) == 0 {
		return rules.AllowAll, nil
	}
	key := cacheKey(policies, egress)
	if !egress && slices.ContainsFunc(policies, func(i int) bool { return c.policies[i].namedIngress }) {
		key += "|" + portsSignature(pod)
	}
	if r, ok := c.results[key]; ok {
		return r.rs, r.err
	}
	var b rules.Builder
	for _, i := range policies {
		p := c.policies[i]
		if egress {
			for ri := range p.to {
				b.AddSortedEntries(c.resolve(p, &p.to[ri], true).egress)
			}
			continue
		}
		for ri := range p.from {
			r := &p.from[ri]
			ports := rules.AnyPort
			if !r.allPorts {
				ports = rules.Union(r.numeric, resolveNamed(r.named, pod))
			}
			b.AddSorted(c.resolve(p, r, false).prefixes, ports)
		}
	}
	if !egress {
		for _, hp := range c.opts.HostPeers {
			b.Add(hp, rules.AnyPort)
		}
	}
	rs, err := c.checkLimits(b.Build(true))
	c.results[key] = result{rs: rs, err: err}
	return rs, err
}

func (c *Compiler) checkLimits(rs rules.RuleSet) (rules.RuleSet, error) {
	if n := len(rs.Entries); n > c.opts.MaxEntries {
		return rules.DenyAll, fmt.Errorf("%w: %d address entries, the limit is %d", ErrCapacity, n, c.opts.MaxEntries)
	}
	for _, e := range rs.Entries {
		if n := len(e.Ports.Ranges); n > c.opts.MaxPortRanges {
			return rules.DenyAll, fmt.Errorf("%w: %s allows %d port ranges, the limit is %d", ErrCapacity, e.Prefix, n, c.opts.MaxPortRanges)
		}
	}
	return rs, nil
}

func cacheKey(policies []int, egress bool) string {
	var b strings.Builder
	if egress {
		b.WriteString("e:")
	} else {
		b.WriteString("i:")
	}
	for _, i := range policies {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(',')
	}
	return b.String()
}

// portsSignature identifies a pod's container ports, which ingress named
// ports resolve against.
func portsSignature(pod *podInfo) string {
	parts := make([]string, 0, len(pod.ports))
	for _, p := range pod.ports {
		parts = append(parts, fmt.Sprintf("%s/%s/%d", p.Name, p.Protocol, p.ContainerPort))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
