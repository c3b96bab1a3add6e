#!/usr/bin/env bash
# Builds Volcano (VOLCANO_VERSION) for the end-to-end suite from its Go
# module, offline: its scheduler, controller manager and admission webhook
# (hack/build-tools.sh, cached by version), each in a FROM-scratch image
# named as Volcano names its own, xila-guard/volcano-vc-<binary>:VOLCANO_VERSION.
# Images that exist are kept. make e2e passes their names (VOLCANO_IMAGES)
# and the release manifest of the module (VOLCANO_MANIFEST) to the suite.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

"${REPO_ROOT}/hack/ensure-docker.sh"
binaries=(vc-scheduler vc-controller-manager vc-webhook-manager)
missing=()
for b in "${binaries[@]}"; do
  docker image inspect "xila-guard/volcano-${b}:${VOLCANO_VERSION}" >/dev/null 2>&1 || missing+=("${b}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  log "Volcano ${VOLCANO_VERSION} images are up to date"
  exit 0
fi
"${REPO_ROOT}/hack/build-tools.sh" "${missing[@]}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/xg-volcano.XXXXXX")
trap 'rm -rf "${WORK}"' EXIT
for b in "${missing[@]}"; do
  ctx="${WORK}/${b}"
  mkdir -p "${ctx}"
  cp "$(readlink -f "${XG_BIN}/${b}")" "${ctx}/${b}"
  printf 'FROM scratch\nCOPY %s /%s\nENTRYPOINT ["/%s"]\n' "${b}" "${b}" "${b}" >"${ctx}/Dockerfile"
  docker_build -q --label "org.opencontainers.image.version=${VOLCANO_VERSION}" \
    -t "xila-guard/volcano-${b}:${VOLCANO_VERSION}" "${ctx}" >/dev/null
  log "image xila-guard/volcano-${b}:${VOLCANO_VERSION}"
done
