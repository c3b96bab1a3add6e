#!/usr/bin/env bash
# Brings up the lab cluster $CLUSTER_NAME (the nodes of hack/kind/cluster.yaml:
# 1 control plane, 2 workers) from the offline node image, or from
# $KIND_NODE_IMAGE when set, with pod networking, kube-proxy and CoreDNS
# working; it ends only when every declared node is Ready. A healthy cluster from the same image is
# reused; anything else is recreated. The kubeconfig goes to $KIND_KUBECONFIG.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

"${REPO_ROOT}/hack/ensure-docker.sh"
"${REPO_ROOT}/hack/build-tools.sh" kind kubectl
kind() { "${XG_BIN}/kind" "$@"; }
kubectl() { "${XG_BIN}/kubectl" --kubeconfig "${KIND_KUBECONFIG}" "$@"; }

if [[ -n ${KIND_NODE_IMAGE:-} ]]; then
  image=${KIND_NODE_IMAGE}
  if ! docker image inspect "${image}" >/dev/null 2>&1; then
    log "pulling ${image}"
    docker pull -q "${image}" >/dev/null 2>&1 ||
      die "node image ${image} is not present and cannot be pulled: unset KIND_NODE_IMAGE to use the offline image (make kind-image), or pull it where a registry is reachable"
  fi
else
  image=${NODE_IMAGE}
  "${REPO_ROOT}/hack/build-node-image.sh"
fi
image_id=$(docker image inspect -f '{{.Id}}' "${image}")
expected=$(kind_config_nodes "${LAB_KIND_CONFIG}")

mkdir -p "$(dirname "${KIND_KUBECONFIG}")"
healthy() {
  local node_image ready
  node_image=$(docker inspect -f '{{.Image}}' "${CLUSTER_NAME}-control-plane" 2>/dev/null) || return 1
  [[ ${node_image} == "${image_id}" ]] || return 1
  kind get kubeconfig --name "${CLUSTER_NAME}" >"${KIND_KUBECONFIG}" 2>/dev/null || return 1
  ready=$(kubectl get nodes --request-timeout=5s -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null) || return 1
  [[ $(grep -c '^True$' <<<"${ready}") -eq ${expected} ]]
}

if kind get clusters 2>/dev/null | grep -qx "${CLUSTER_NAME}"; then
  if healthy; then
    log "reusing the healthy cluster ${CLUSTER_NAME} (kubeconfig: ${KIND_KUBECONFIG})"
    exit 0
  fi
  log "cluster ${CLUSTER_NAME} is unhealthy or from another image: recreating it"
  kind delete cluster --name "${CLUSTER_NAME}" >/dev/null 2>&1
fi

timed "creating cluster ${CLUSTER_NAME} from ${image}" \
  kind create cluster --name "${CLUSTER_NAME}" --image "${image}" \
  --config "${LAB_KIND_CONFIG}" --kubeconfig "${KIND_KUBECONFIG}" --retain=false -q ||
  die "kind could not create the cluster: run 'make kind-down' and retry; 'KEEP_CLUSTER=1 ${XG_BIN}/kind create cluster --retain ...' keeps the nodes for 'kind export logs'"
# kind create can return before the last worker has registered; the network
# step waits for every declared node, so none is left without configuration.
timed "pod networking" "${REPO_ROOT}/hack/kind-network.sh" "${CLUSTER_NAME}" "${KIND_KUBECONFIG}" "${LAB_KIND_CONFIG}"
timed "waiting for ${expected} Ready nodes and CoreDNS" bash -c "
  '${XG_BIN}/kubectl' --kubeconfig '${KIND_KUBECONFIG}' wait --for=condition=Ready nodes --all --timeout=180s >/dev/null &&
  '${XG_BIN}/kubectl' --kubeconfig '${KIND_KUBECONFIG}' -n kube-system rollout status deployment/coredns --timeout=180s >/dev/null" ||
  die "the cluster did not become ready in 180s: inspect it with kubectl --kubeconfig ${KIND_KUBECONFIG} get pods -A, then make kind-down kind-up"
log "cluster ${CLUSTER_NAME} is ready (kubeconfig: ${KIND_KUBECONFIG})"
