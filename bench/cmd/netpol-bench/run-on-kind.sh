#!/usr/bin/env bash
# Runs netpol-bench on a kind cluster of its own, from creation to deletion:
# builds the agent image (tagged netpol-bench, so images other work builds
# under the same git describe are not used), the bench and the prober,
# creates the cluster $CLUSTER_NAME (default xg-netpol-bench) from the
# offline node image, gives it pod networking, loads the agent image, runs
# the measurements and deletes the cluster, also on failure.
#
# usage: bench/cmd/netpol-bench/run-on-kind.sh propagation|dataplane [bench flags]
#        bench/cmd/netpol-bench/run-on-kind.sh all   (flags from PROPAGATION_FLAGS, DATAPLANE_FLAGS)
# Reports go to _output/netpol-bench/<measurement>.md as well as stdout.
set -o errexit -o nounset -o pipefail
CLUSTER_NAME="${CLUSTER_NAME:-xg-netpol-bench}"
source "$(dirname "${BASH_SOURCE[0]}")/../../../hack/lib.sh"
cd "${REPO_ROOT}"

what=${1:?usage: $0 propagation|dataplane|all [bench flags]}
shift
case ${what} in
propagation | dataplane) measurements=("${what}") ;;
all) measurements=(propagation dataplane) ;;
*) die "unknown measurement ${what}: want propagation, dataplane or all" ;;
esac

OUT="${REPO_ROOT}/_output/netpol-bench"
KUBECONFIG_FILE="${OUT}/kubeconfig"
TAG=netpol-bench
mkdir -p "${OUT}"
kind() { "${XG_BIN}/kind" "$@"; }
kubectl() { "${XG_BIN}/kubectl" --kubeconfig "${KUBECONFIG_FILE}" "$@"; }

"${REPO_ROOT}/hack/ensure-docker.sh"
"${REPO_ROOT}/hack/build-tools.sh" kind kubectl helm
docker image inspect "${NODE_IMAGE}" >/dev/null 2>&1 || die "node image ${NODE_IMAGE} is missing: run make kind-image"
XG_VERSION=${TAG} "${REPO_ROOT}/hack/build-images.sh" agent
timed "building netpol-bench and its prober" bash -c "
  go build -o '${OUT}/netpol-bench' ./bench/cmd/netpol-bench &&
  CGO_ENABLED=0 go build -trimpath -o '${OUT}/prober' ./bench/cmd/netpol-bench/prober"

cleanup() { kind delete cluster --name "${CLUSTER_NAME}" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
timed "creating cluster ${CLUSTER_NAME}" \
  kind create cluster --name "${CLUSTER_NAME}" --image "${NODE_IMAGE}" \
  --config "${LAB_KIND_CONFIG}" --kubeconfig "${KUBECONFIG_FILE}" --retain=false -q
"${REPO_ROOT}/hack/kind-network.sh" "${CLUSTER_NAME}" "${KUBECONFIG_FILE}"
timed "waiting for Ready nodes and CoreDNS" bash -c "
  '${XG_BIN}/kubectl' --kubeconfig '${KUBECONFIG_FILE}' wait --for=condition=Ready nodes --all --timeout=180s >/dev/null &&
  '${XG_BIN}/kubectl' --kubeconfig '${KUBECONFIG_FILE}' -n kube-system rollout status deployment/coredns --timeout=180s >/dev/null"
timed "loading xila-guard/agent:${TAG}" bash -c "'${XG_BIN}/kind' load docker-image 'xila-guard/agent:${TAG}' --name '${CLUSTER_NAME}' >/dev/null 2>&1"

for m in "${measurements[@]}"; do
  if [[ ${what} == all ]]; then
    var="${m^^}_FLAGS"
    read -r -a flags <<<"${!var:-}"
    set -- "${flags[@]}"
  fi
  log "machine: $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
  timed "netpol-bench ${m}" "${OUT}/netpol-bench" "${m}" --kubeconfig "${KUBECONFIG_FILE}" \
    --helm "${XG_BIN}/helm" --chart charts/xila-guard --image-tag "${TAG}" \
    --agnhost "${AGNHOST_IMAGE}" --prober "${OUT}/prober" --out "${OUT}/${m}.md" ${1+"$@"}
done
