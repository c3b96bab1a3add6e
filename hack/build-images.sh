#!/usr/bin/env bash
# Builds one image per component, FROM scratch with a static binary, tagged
# xila-guard/<component>:$XG_VERSION (git describe). A component is every
# components/<name>/cmd/xila-guard-<name> main package. An image of a clean
# tree's tag that exists is kept.
#
# usage: hack/build-images.sh [component ...]   (default: all that have one)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

"${REPO_ROOT}/hack/ensure-docker.sh"

components=("$@")
if [[ ${#components[@]} -eq 0 ]]; then
  for d in components/*/cmd/xila-guard-*; do
    [[ -d ${d} ]] && components+=("$(basename "$(dirname "$(dirname "${d}")")")")
  done
fi
if [[ ${#components[@]} -eq 0 ]]; then
  log "no component has a cmd/xila-guard-<name> package yet: no images to build"
  exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/xg-images.XXXXXX")
trap 'rm -rf "${WORK}"' EXIT
ldflags="-s -w -X github.com/xila-guard/xila-guard/components/api/version.Version=${XG_VERSION}"
for c in "${components[@]}"; do
  pkg="./components/${c}/cmd/xila-guard-${c}"
  [[ -d ${pkg} ]] || die "unknown component ${c}: expected a main package in ${pkg}"
  # The tag of a clean tree names its commit: an image of it is already
  # what this would build. A dirty tree's tag names no fixed content.
  if [[ ${XG_VERSION} != *-dirty ]] && docker image inspect "xila-guard/${c}:${XG_VERSION}" >/dev/null 2>&1; then
    log "image xila-guard/${c}:${XG_VERSION} exists"
    continue
  fi
  bin="xila-guard-${c}"
  ctx="${WORK}/${c}"
  mkdir -p "${ctx}"
  timed "building ${bin} ${XG_VERSION}" \
    env CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${ctx}/${bin}" "${pkg}"
  cat >"${ctx}/Dockerfile" <<DOCKERFILE
FROM scratch
COPY ${bin} /${bin}
USER 65532:65532
ENTRYPOINT ["/${bin}"]
DOCKERFILE
  docker_build -q \
    --label "org.opencontainers.image.version=${XG_VERSION}" \
    --label "org.opencontainers.image.title=${bin}" \
    -t "xila-guard/${c}:${XG_VERSION}" "${ctx}" >/dev/null
  log "image xila-guard/${c}:${XG_VERSION}"
done
