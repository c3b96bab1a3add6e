#!/usr/bin/env bash
# Writes the Kubernetes pins of hack/versions.env into every Go module that
# builds against k8s.io/kubernetes, and into go.work. Run after editing
# versions.env; make verify fails when this would change anything.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

args=()
for m in "${KUBE_STAGING_MODULES[@]}"; do
  args+=("-replace=k8s.io/${m}=k8s.io/${m}@${KUBE_STAGING_VERSION}")
done

go work edit "${args[@]}"
for mod in hack/tools/go.mod components/scheduler/go.mod bench/go.mod; do
  if grep -q 'k8s.io/kubernetes' "${mod}"; then
    go mod edit "${args[@]}" -require="k8s.io/kubernetes@${KUBE_VERSION}" "${mod}"
  fi
done
# Modules outside go.work that build against the Kubernetes libraries
# through other libraries (Helm, kind) state the same pins.
for mod in terraform/provider/go.mod; do
  go mod edit "${args[@]}" "${mod}"
done

# The Volcano release the end-to-end suite builds.
go mod edit -require="volcano.sh/volcano@${VOLCANO_VERSION}" -require="volcano.sh/apis@${VOLCANO_APIS_VERSION}" hack/tools/volcano/go.mod
# The DRA example driver release the end-to-end suite builds.
go mod edit -require="sigs.k8s.io/dra-example-driver@${DRA_EXAMPLE_VERSION}" hack/tools/dra-example/go.mod
