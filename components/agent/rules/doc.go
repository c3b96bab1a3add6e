// Package rules is the compiled form of Kubernetes NetworkPolicy that the
// dataplane enforces: for one pod and one direction, a list of address
// prefixes, each with the protocols and ports its peers may use.
//
// A RuleSet is flattened for longest-prefix matching: when prefixes nest, the
// longer one already carries everything its ancestors allow, so a single
// longest-prefix lookup answers a packet. Builder produces such sets from
// overlapping contributions, including CIDRs with exceptions cut out.
package rules
