#!/usr/bin/env bash
# Runs the Volcano scenarios against real Volcano as Volcano publishes it:
# its release manifest (VOLCANO_VERSION) from GitHub and its images from
# docker.io, so this needs a registry; offline it stops with a clear
# message instead of pretending. make e2e runs the same scenarios offline,
# on Volcano built from its Go module (hack/build-dependency-images.sh).
set -o errexit -o nounset -o pipefail
requested_version="${VOLCANO_VERSION:-}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

# hack/versions.env pins the version; VOLCANO_VERSION=... overrides it.
VOLCANO_VERSION="${requested_version:-${VOLCANO_VERSION}}"
manifest="https://raw.githubusercontent.com/volcano-sh/volcano/${VOLCANO_VERSION}/installer/volcano-development.yaml"

reachable() {
  local code
  code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' "$1" 2>/dev/null) || true
  [[ ${code} != 000 && ${code} != "" ]]
}
for url in https://registry-1.docker.io/v2/ "${manifest}"; do
  if ! reachable "${url}"; then
    die "no registry is reachable (${url} did not answer): real Volcano ${VOLCANO_VERSION} needs its images from docker.io and its manifest from GitHub. Run make e2e-volcano where both are reachable; offline, make e2e runs the same scenarios on Volcano built from its Go module."
  fi
done

make -C "${REPO_ROOT}" tools images kind-image
log "installing Volcano ${VOLCANO_VERSION} from ${manifest} and running the Volcano scenarios"
XG_BIN="${XG_BIN}" XG_IMAGE_TAG="${XG_VERSION}" NODE_IMAGE="${NODE_IMAGE}" AGNHOST_IMAGE="${AGNHOST_IMAGE}" \
  VOLCANO_MANIFEST="${manifest}" VOLCANO_IMAGES= \
  go test -tags e2e -count=1 -timeout 30m -v -run 'TestPlatform' ./e2e/...
