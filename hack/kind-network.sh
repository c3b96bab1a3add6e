#!/usr/bin/env bash
# Gives every node of a kind cluster pod networking without a CNI image: a
# ptp + host-local + portmap configuration for the node's spec.podCIDR, and a
# route to every other node's pod CIDR through that node's address. Safe to
# run again; it converges.
#
# usage: hack/kind-network.sh CLUSTER KUBECONFIG
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CLUSTER=${1:?usage: kind-network.sh CLUSTER KUBECONFIG}
KUBECONFIG_PATH=${2:?usage: kind-network.sh CLUSTER KUBECONFIG}
POD_SUBNET=${POD_SUBNET:-10.244.0.0/16}
kubectl() { "${XG_BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" "$@"; }

# name podCIDR internalIP, one node per line
nodes=$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.podCIDR}{" "}{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}')
[[ -n ${nodes} ]] || die "cluster ${CLUSTER} has no nodes: recreate it with make kind-down kind-up"

while read -r node cidr _; do
  [[ -n ${cidr} ]] || die "node ${node} has no spec.podCIDR: the controller-manager must allocate node CIDRs (kind does this by default)"
  routes=""
  while read -r peer peer_cidr peer_ip; do
    [[ ${peer} == "${node}" ]] || routes+="ip route replace ${peer_cidr} via ${peer_ip}"$'\n'
  done <<<"${nodes}"
  # One exec per node: the CNI configuration (written atomically), the
  # masquerade rule for traffic leaving the pod network, the routes, and
  # the bpffs mount that systemd provides on ordinary nodes (the
  # NetworkPolicy agent pins its maps and programs there).
  docker exec -i "${node}" bash -euc "
    mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
    mkdir -p /etc/cni/net.d
    cat >/etc/cni/net.d/.10-xila-guard-ptp.conflist
    mv /etc/cni/net.d/.10-xila-guard-ptp.conflist /etc/cni/net.d/10-xila-guard-ptp.conflist
    iptables -t nat -C POSTROUTING -s ${cidr} ! -d ${POD_SUBNET} -j MASQUERADE 2>/dev/null ||
      iptables -t nat -A POSTROUTING -s ${cidr} ! -d ${POD_SUBNET} -j MASQUERADE
    ${routes}" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "xila-guard-lab",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${cidr}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      },
      "mtu": 1500
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
done <<<"${nodes}"
log "pod networking configured on $(wc -l <<<"${nodes}") nodes"
