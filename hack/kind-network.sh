#!/usr/bin/env bash
# Gives every node of a kind cluster pod networking without a CNI image. It
# first waits until every node the kind configuration declares has
# registered with a spec.podCIDR and an InternalIP (a worker can register
# after kind create returns), then runs the node set-up shared with the
# Terraform provider (terraform/provider/internal/kindlab/node-network.sh:
# the ptp + host-local + portmap conflist for the node's pod CIDR, a route to
# every other node's pod CIDR, masquerade, bpffs) on each node. Safe to run
# again; it converges.
#
# usage: hack/kind-network.sh CLUSTER KUBECONFIG [KIND_CONFIG]
#
# KIND_CONFIG defaults to hack/kind/cluster.yaml, the configuration make
# kind-up and make e2e create the cluster from. NODE_WAIT_TIMEOUT (seconds,
# default 180) bounds the wait for the nodes.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage="usage: kind-network.sh CLUSTER KUBECONFIG [KIND_CONFIG]"
CLUSTER=${1:?${usage}}
KUBECONFIG_PATH=${2:?${usage}}
CONFIG=${3:-${LAB_KIND_CONFIG}}
NODE_WAIT_TIMEOUT=${NODE_WAIT_TIMEOUT:-180}
kubectl() { "${XG_BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" "$@"; }

expected=$(kind_config_nodes "${CONFIG}")
pod_subnet=$(kind_config_pod_subnet "${CONFIG}")
mapfile -t containers < <("${XG_BIN}/kind" get nodes --name "${CLUSTER}" 2>/dev/null | sort)
if ((${#containers[@]} != expected)); then
  die "cluster ${CLUSTER} has ${#containers[@]} node containers (${containers[*]:-none}), ${CONFIG} declares ${expected}: recreate it with make kind-down kind-up"
fi

# wanting lists, one per line, why each expected node cannot be configured
# yet; it prints nothing once every node is ready for networking. nodes
# holds "name|podCIDR|InternalIP" lines from the API server.
wanting() {
  local name line cidr ip
  for name in "${containers[@]}"; do
    line=$(grep -m1 "^${name}|" <<<"${nodes}") || {
      echo "${name} has not registered (its kubelet: docker exec ${name} journalctl -u kubelet)"
      continue
    }
    IFS='|' read -r _ cidr ip <<<"${line}"
    [[ -n ${cidr} ]] || echo "${name} has no spec.podCIDR (the controller-manager allocates it: kubectl -n kube-system logs kube-controller-manager-${CLUSTER}-control-plane)"
    [[ -n ${ip} ]] || echo "${name} has no InternalIP address"
  done
}

deadline=$((SECONDS + NODE_WAIT_TIMEOUT))
while :; do
  nodes=$(kubectl get nodes --request-timeout=10s \
    -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.spec.podCIDR}{"|"}{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' 2>&1) ||
    nodes="error: ${nodes}"
  missing=$(wanting)
  [[ -n ${missing} ]] || break
  if ((SECONDS >= deadline)); then
    [[ ${nodes} != error:* ]] || log "last answer of the API server: ${nodes}"
    die "after ${NODE_WAIT_TIMEOUT}s, $(wc -l <<<"${missing}") of the ${expected} nodes of cluster ${CLUSTER} cannot get pod networking yet: $(paste -sd';' <<<"${missing}" | sed 's/;/; /g'). Set NODE_WAIT_TIMEOUT to wait longer, or recreate the cluster with make kind-down kind-up"
  fi
  sleep 2
done

script=$(<"${NODE_NETWORK_SCRIPT}")
for name in "${containers[@]}"; do
  IFS='|' read -r _ cidr _ < <(grep -m1 "^${name}|" <<<"${nodes}")
  peers=()
  for peer in "${containers[@]}"; do
    [[ ${peer} != "${name}" ]] || continue
    IFS='|' read -r _ peer_cidr peer_ip < <(grep -m1 "^${peer}|" <<<"${nodes}")
    peers+=("${peer_cidr}=${peer_ip}")
  done
  docker exec "${name}" bash -c "${script}" node-network.sh "${cidr}" "${pod_subnet}" "${peers[@]}" ||
    die "pod networking on node ${name} failed (above): recreate the cluster with make kind-down kind-up"
done
log "pod networking configured on the ${expected} nodes of ${CLUSTER}"
