#!/usr/bin/env bash
# Shared helpers for the scripts under hack/. Source it; do not run it.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO_ROOT
# shellcheck source=hack/versions.env
source "${REPO_ROOT}/hack/versions.env"

# Everything built from source is cached by version outside the clone, so a
# fresh clone on the same machine reuses it. Override with XG_CACHE.
XG_CACHE="${XG_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/xila-guard}"
export XG_CACHE
XG_BIN="${XG_BIN:-${REPO_ROOT}/_output/bin}"
export XG_BIN

# Staging modules of k8s.io/kubernetes, replaced with KUBE_STAGING_VERSION.
KUBE_STAGING_MODULES=(
  api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
  cloud-provider cluster-bootstrap code-generator component-base
  component-helpers controller-manager cri-api cri-client csi-translation-lib
  dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
  kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
  mount-utils pod-security-admission sample-apiserver sample-cli-plugin
  sample-controller
)

_XG_START="${_XG_START:-$(date +%s)}"
export _XG_START

# log prints a progress line with the time elapsed since the first script of
# this run started.
log() {
  local now
  now=$(date +%s)
  printf '[%4ss] %s\n' "$((now - _XG_START))" "$*" >&2
}

# die prints one line that says what went wrong and how to fix it, and exits.
die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}

# timed runs a long command, printing what it is and how long it took.
timed() {
  local what=$1
  shift
  local t0
  t0=$(date +%s)
  log "${what} ..."
  local rc=0
  "$@" || rc=$?
  if ((rc != 0)); then
    log "${what}: failed after $(($(date +%s) - t0))s"
    return "${rc}"
  fi
  log "${what}: done in $(($(date +%s) - t0))s"
}

# require_free_space fails early, with the fix, when the filesystem holding
# a directory has less than the given number of GiB free.
require_free_space() {
  local dir=$1 need_gib=$2 avail_kib
  mkdir -p "${dir}"
  avail_kib=$(df -Pk "${dir}" | awk 'NR==2 {print $4}')
  if ((avail_kib < need_gib * 1024 * 1024)); then
    die "only $((avail_kib / 1024 / 1024)) GiB free under ${dir}, need ${need_gib} GiB: free disk space (docker system prune, rm -rf ${XG_CACHE}) or set XG_CACHE to a larger disk"
  fi
}

# as_root runs a command as root, through sudo when needed.
as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  else
    sudo "$@"
  fi
}

# The version stamped into component binaries and image tags.
XG_VERSION="${XG_VERSION:-$(git -C "${REPO_ROOT}" describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)}"
export XG_VERSION

CLUSTER_NAME="${CLUSTER_NAME:-xila-guard}"
KIND_KUBECONFIG="${KIND_KUBECONFIG:-${REPO_ROOT}/_output/kubeconfig}"
export CLUSTER_NAME KIND_KUBECONFIG
# The kind configuration of the lab cluster: the number of nodes the lab
# waits for, and its pod subnet, come from it.
LAB_KIND_CONFIG="${REPO_ROOT}/hack/kind/cluster.yaml"
# The per-node pod network set-up, shared with the Terraform provider.
NODE_NETWORK_SCRIPT="${REPO_ROOT}/terraform/provider/internal/kindlab/node-network.sh"

# kind_config_nodes prints how many nodes a kind configuration declares.
kind_config_nodes() {
  local n
  n=$(grep -cE '^[[:space:]]*-[[:space:]]+role:' "$1") || true
  ((n > 0)) || die "$1 declares no nodes (no '- role:' entries)"
  echo "${n}"
}

# kind_config_pod_subnet prints the pod subnet of a kind configuration, or
# kind's default.
kind_config_pod_subnet() {
  local subnet
  subnet=$(sed -nE 's/^[[:space:]]*podSubnet:[[:space:]]*"?([^"[:space:]]+)"?.*/\1/p' "$1")
  echo "${subnet:-10.244.0.0/16}"
}

# docker_build runs the classic builder, which needs no BuildKit and no
# registry for FROM scratch or local base images, without its deprecation
# notice.
docker_build() {
  DOCKER_BUILDKIT=0 docker build "$@" 2> >(grep -v -e 'legacy builder is deprecated' -e 'BuildKit is currently disabled' -e 'environment-variable\.' -e '^$' >&2)
}
