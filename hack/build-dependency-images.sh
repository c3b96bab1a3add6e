#!/usr/bin/env bash
# Builds the other projects the end-to-end suite runs, from their Go
# modules, offline (hack/build-tools.sh, cached by version), each binary in
# a FROM-scratch image of its own:
#   - Volcano (VOLCANO_VERSION): its scheduler, controller manager and
#     admission webhook, xila-guard/volcano-vc-<binary>:VOLCANO_VERSION;
#   - the DRA example driver (DRA_EXAMPLE_VERSION): its kubelet plugin,
#     xila-guard/dra-example-driver:DRA_EXAMPLE_VERSION, which its Helm
#     chart runs by name, so the binary is on the image's PATH.
# Images that exist are kept. make e2e passes their names (VOLCANO_IMAGES,
# DRA_EXAMPLE_IMAGE), Volcano's release manifest and the driver's chart from
# the module zips to the suite.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

"${REPO_ROOT}/hack/ensure-docker.sh"
# binary|image|version
images=(
  "vc-scheduler|xila-guard/volcano-vc-scheduler:${VOLCANO_VERSION}|${VOLCANO_VERSION}"
  "vc-controller-manager|xila-guard/volcano-vc-controller-manager:${VOLCANO_VERSION}|${VOLCANO_VERSION}"
  "vc-webhook-manager|xila-guard/volcano-vc-webhook-manager:${VOLCANO_VERSION}|${VOLCANO_VERSION}"
  "dra-example-kubeletplugin|xila-guard/dra-example-driver:${DRA_EXAMPLE_VERSION}|${DRA_EXAMPLE_VERSION}"
)
missing=()
for entry in "${images[@]}"; do
  IFS='|' read -r b image _ <<<"${entry}"
  docker image inspect "${image}" >/dev/null 2>&1 || missing+=("${b}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  log "Volcano ${VOLCANO_VERSION} and DRA example driver ${DRA_EXAMPLE_VERSION} images are up to date"
  exit 0
fi
"${REPO_ROOT}/hack/build-tools.sh" "${missing[@]}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/xg-deps.XXXXXX")
trap 'rm -rf "${WORK}"' EXIT
for entry in "${images[@]}"; do
  IFS='|' read -r b image version <<<"${entry}"
  [[ " ${missing[*]} " == *" ${b} "* ]] || continue
  ctx="${WORK}/${b}"
  mkdir -p "${ctx}"
  cp "$(readlink -f "${XG_BIN}/${b}")" "${ctx}/${b}"
  printf 'FROM scratch\nENV PATH=/usr/bin\nCOPY %s /usr/bin/%s\nENTRYPOINT ["/usr/bin/%s"]\n' "${b}" "${b}" "${b}" >"${ctx}/Dockerfile"
  docker_build -q --label "org.opencontainers.image.version=${version}" -t "${image}" "${ctx}" >/dev/null
  log "image ${image}"
done
