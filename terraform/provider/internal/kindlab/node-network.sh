#!/usr/bin/env bash
# Pod networking for one node of the lab cluster, run inside the node
# container. This is the only copy of the lab's CNI configuration and of the
# per-node steps: hack/kind-network.sh runs this file, and the Terraform
# provider embeds it (kindlab's network.go).
#
# usage: node-network.sh POD_CIDR POD_SUBNET [PEER_POD_CIDR=PEER_IP ...]
#
# POD_CIDR is the node's spec.podCIDR, POD_SUBNET the cluster's pod subnet,
# and every other node is named by its pod CIDR and InternalIP. Running it
# again converges: routes into the pod subnet that no peer accounts for are
# removed, the masquerade rule and the CNI configuration are replaced. The
# CNI configuration is written last, so the node turns Ready only once its
# routes are in place.
set -o errexit -o nounset -o pipefail

usage="usage: node-network.sh POD_CIDR POD_SUBNET [PEER_POD_CIDR=PEER_IP ...]"
POD_CIDR=${1:?${usage}}
POD_SUBNET=${2:?${usage}}
shift 2
# Unit tests point CNI_CONF_DIR at a temporary directory.
CNI_CONF_DIR=${CNI_CONF_DIR:-/etc/cni/net.d}
CONFLIST=${CNI_CONF_DIR}/10-xila-guard-ptp.conflist
MASQ_CHAIN=XG-LAB-MASQ

# bpffs: systemd mounts it on ordinary nodes; the NetworkPolicy agent pins
# its maps and programs there.
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

# Traffic leaving the pod network is masqueraded by one rule in a chain of
# its own, rebuilt on every run.
iptables -t nat -N "${MASQ_CHAIN}" 2>/dev/null || true
iptables -t nat -F "${MASQ_CHAIN}"
iptables -t nat -A "${MASQ_CHAIN}" -s "${POD_CIDR}" ! -d "${POD_SUBNET}" -j MASQUERADE
iptables -t nat -C POSTROUTING -j "${MASQ_CHAIN}" 2>/dev/null ||
  iptables -t nat -A POSTROUTING -j "${MASQ_CHAIN}"

# Every other node's pod CIDR through that node.
declare -A wanted=()
for peer in "$@"; do
  cidr=${peer%%=*}
  via=${peer#*=}
  if [[ ${cidr} == "${peer}" || -z ${cidr} || -z ${via} ]]; then
    echo "peer ${peer}: want PEER_POD_CIDR=PEER_IP; ${usage}" >&2
    exit 2
  fi
  ip route replace "${cidr}" via "${via}"
  wanted[${cidr}]=1
done
# Routes through a gateway into the pod subnet that no peer asked for are
# left from a node that is gone or re-registered with another pod CIDR. The
# per-pod routes of the ptp plugin have no gateway and stay.
while read -r dst _; do
  [[ -n ${wanted[${dst}]:-} ]] || ip route del "${dst}"
done < <(ip -4 route show root "${POD_SUBNET}" | awk '$2 == "via" {print $1}')

# A point-to-point veth per pod with addresses from the node's pod CIDR, and
# host ports through portmap. The temporary name does not end in .conflist,
# so the runtime never loads a half-written file.
mkdir -p "${CNI_CONF_DIR}"
cat >"${CONFLIST}.tmp" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "xila-guard-lab",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${POD_CIDR}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      },
      "mtu": 1500
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
mv "${CONFLIST}.tmp" "${CONFLIST}"
