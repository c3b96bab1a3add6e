#!/usr/bin/env bash
# Deletes the lab cluster $CLUSTER_NAME, if it exists.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if ! docker info >/dev/null 2>&1; then
  log "no Docker daemon answers: there is no cluster to delete"
  exit 0
fi
"${REPO_ROOT}/hack/build-tools.sh" kind
"${XG_BIN}/kind" delete cluster --name "${CLUSTER_NAME}" --kubeconfig "${KIND_KUBECONFIG}"
rm -f "${KIND_KUBECONFIG}"
