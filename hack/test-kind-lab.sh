#!/usr/bin/env bash
# Creates the lab cluster KIND_LAB_RUNS times in a row (default 3) through
# hack/kind-up.sh, the path of make kind-up and make demo, under a cluster
# name of its own (KIND_LAB_CLUSTER, default xg-kind-lab). Each time every
# node of hack/kind/cluster.yaml must be Ready with the lab's pod network
# (its conflist, a route to every other node, one masquerade rule). The
# first run also makes a worker register late: hack/kind-network.sh must
# name it when it gives up, wait for it otherwise, and converge on a stale
# route. The cluster is deleted after every run and on exit.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

RUNS=${KIND_LAB_RUNS:-3}
CLUSTER_NAME=${KIND_LAB_CLUSTER:-xg-kind-lab}
KIND_KUBECONFIG=${REPO_ROOT}/_output/kind-lab/kubeconfig
export CLUSTER_NAME KIND_KUBECONFIG
[[ ${RUNS} =~ ^[1-9][0-9]*$ ]] || die "KIND_LAB_RUNS=${RUNS}: want a positive number"
[[ ${CLUSTER_NAME} != xila-guard ]] || die "KIND_LAB_CLUSTER=xila-guard would delete the lab cluster: pick another name"

kubectl() { "${XG_BIN}/kubectl" --kubeconfig "${KIND_KUBECONFIG}" "$@"; }
network() { "${REPO_ROOT}/hack/kind-network.sh" "${CLUSTER_NAME}" "${KIND_KUBECONFIG}" "${LAB_KIND_CONFIG}"; }
delete_cluster() { "${REPO_ROOT}/hack/kind-down.sh" >/dev/null 2>&1 || true; }
fail() { die "run ${run} of ${RUNS}: $*"; }

"${REPO_ROOT}/hack/build-tools.sh" kind kubectl
trap delete_cluster EXIT
expected=$(kind_config_nodes "${LAB_KIND_CONFIG}")

# check_lab fails unless every declared node is Ready and carries the pod
# network of its current spec.podCIDR, with no route or rule left over.
check_lab() {
  local nodes name cidr ip peer peer_cidr peer_ip got
  nodes=$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.spec.podCIDR}{"|"}{.status.addresses[?(@.type=="InternalIP")].address}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ $(grep -c '|True$' <<<"${nodes}") -eq ${expected} ]] ||
    fail "want ${expected} Ready nodes, have: $(tr '\n' ' ' <<<"${nodes}")"
  while IFS='|' read -r name cidr _ _; do
    docker exec "${name}" grep -q "\"subnet\": \"${cidr}\"" /etc/cni/net.d/10-xila-guard-ptp.conflist ||
      fail "node ${name}: the conflist does not allocate from its pod CIDR ${cidr}"
    got=$(docker exec "${name}" iptables -t nat -S XG-LAB-MASQ | grep -c -- '-j MASQUERADE') || true
    [[ ${got} -eq 1 ]] || fail "node ${name}: ${got} masquerade rules, want 1"
    got=$(docker exec "${name}" iptables -t nat -S POSTROUTING | grep -c -- '-j XG-LAB-MASQ') || true
    [[ ${got} -eq 1 ]] || fail "node ${name}: POSTROUTING jumps to XG-LAB-MASQ ${got} times, want 1"
    got=$(docker exec "${name}" ip -4 route show root "$(kind_config_pod_subnet "${LAB_KIND_CONFIG}")" | awk '$2 == "via" {print $1, $2, $3}' | sort)
    want=$(while IFS='|' read -r peer peer_cidr peer_ip _; do
      [[ ${peer} == "${name}" ]] || echo "${peer_cidr} via ${peer_ip}"
    done <<<"${nodes}" | sort)
    [[ ${got} == "${want}" ]] || fail "node ${name}: routes into the pod network are [${got//$'\n'/, }], want [${want//$'\n'/, }]"
  done <<<"${nodes}"
}

# late_worker deletes the last worker's Node and stops its kubelet, checks
# that the network step gives up naming it, then starts the kubelet while
# the step waits, and leaves a stale route for the step to remove.
late_worker() {
  local late out pid
  late=$("${XG_BIN}/kind" get nodes --name "${CLUSTER_NAME}" | sort | tail -1)
  docker exec "${late}" systemctl stop kubelet
  kubectl delete node "${late}" --wait=true >/dev/null
  docker exec "${CLUSTER_NAME}-control-plane" ip route add 10.244.250.0/24 via "$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${late}")"
  if out=$(NODE_WAIT_TIMEOUT=4 network 2>&1); then
    fail "hack/kind-network.sh succeeded while ${late} was not registered"
  fi
  grep -q "${late} has not registered" <<<"${out}" || fail "hack/kind-network.sh did not name ${late}: ${out}"
  log "hack/kind-network.sh without ${late}: ${out#error: }"
  network &
  pid=$!
  sleep 4
  kill -0 "${pid}" 2>/dev/null || fail "hack/kind-network.sh did not wait for ${late}"
  docker exec "${late}" systemctl start kubelet
  wait "${pid}" || fail "hack/kind-network.sh failed after ${late} registered again"
  kubectl wait --for=condition=Ready nodes --all --timeout=120s >/dev/null ||
    fail "nodes not Ready after ${late} registered again"
}

delete_cluster
took=()
for ((run = 1; run <= RUNS; run++)); do
  t0=$(date +%s)
  "${REPO_ROOT}/hack/kind-up.sh" || fail "hack/kind-up.sh failed"
  took+=("$(($(date +%s) - t0))s")
  check_lab
  if ((run == 1)); then
    late_worker
    check_lab
  fi
  network >/dev/null 2>&1 || fail "hack/kind-network.sh failed on a configured cluster"
  check_lab
  log "run ${run} of ${RUNS}: ${expected} nodes Ready with pod networking (kind-up ${took[-1]})"
  delete_cluster
done
log "the lab cluster came up in all ${RUNS} runs (kind-up: ${took[*]})"
