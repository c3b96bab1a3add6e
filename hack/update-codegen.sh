#!/usr/bin/env bash
# Regenerates the API's deepcopy functions and CRDs from the kubebuilder
# markers in components/api/v1alpha1, the chart's copy of the CRDs and the
# controllers' ClusterRoles. `make verify` runs it and fails when the
# committed output differs.
set -o errexit -o nounset -o pipefail

# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONTROLLER_GEN="${XG_BIN}/controller-gen"
[[ -x "${CONTROLLER_GEN}" ]] || die "${CONTROLLER_GEN} is missing: run hack/build-tools.sh first"

cd "${REPO_ROOT}/components/api"
log "controller-gen: deepcopy"
"${CONTROLLER_GEN}" object paths=./v1alpha1/... paths=./gpu/v1alpha1/... paths=./policyreport/v1alpha2/...
log "controller-gen: CRDs into components/api/config/crd"
rm -f config/crd/*.yaml
"${CONTROLLER_GEN}" crd paths=./v1alpha1/... paths=./gpu/v1alpha1/... output:crd:artifacts:config=config/crd
# The chart carries the same CRDs in crds/, which Helm installs before the
# templates on a first install (and never upgrades or deletes).
log "CRDs into charts/xila-guard/crds"
rm -rf "${REPO_ROOT}/charts/xila-guard/crds"
mkdir -p "${REPO_ROOT}/charts/xila-guard/crds"
cp config/crd/*.yaml "${REPO_ROOT}/charts/xila-guard/crds/"
# The Policy Report CRD (wgpolicyk8s.io) is not ours: Kyverno and
# policy-reporter install their own copy. It goes to a directory of its own,
# never to crds/, which Helm installs always, and the chart renders it as a
# template only with observe.policyReports.installCRD.
log "controller-gen: the PolicyReport CRD into components/api/config/policyreport-crd and the chart"
rm -f config/policyreport-crd/*.yaml
"${CONTROLLER_GEN}" crd paths=./policyreport/v1alpha2/... output:crd:artifacts:config=config/policyreport-crd
rm -rf "${REPO_ROOT}/charts/xila-guard/policyreport-crd"
mkdir -p "${REPO_ROOT}/charts/xila-guard/policyreport-crd"
cp config/policyreport-crd/*.yaml "${REPO_ROOT}/charts/xila-guard/policyreport-crd/"

# The orchestrator profiles, which the chart enables by name
# (orchestratorProfiles) and reads with .Files from its own copy.
log "profiles into charts/xila-guard/profiles"
rm -rf "${REPO_ROOT}/charts/xila-guard/profiles"
mkdir -p "${REPO_ROOT}/charts/xila-guard/profiles"
cp "${REPO_ROOT}"/profiles/*.yaml "${REPO_ROOT}/charts/xila-guard/profiles/"

# The controllers' ClusterRoles, from their +kubebuilder:rbac markers: the
# chart's roles and the integration tests that run each controller with
# only its role start from these.
for m in observe attest gpudevices; do
  log "controller-gen: RBAC into components/${m}/config/rbac"
  paths=./...
  # The key broker has a role of its own.
  [[ ${m} == attest ]] && paths=./app/...
  (cd "${REPO_ROOT}/components/${m}" && "${CONTROLLER_GEN}" rbac:roleName="xila-guard-${m}" paths="${paths}" output:rbac:artifacts:config=config/rbac)
done
log "controller-gen: RBAC into components/attest/config/kbs-rbac"
(cd "${REPO_ROOT}/components/attest" && "${CONTROLLER_GEN}" rbac:roleName=xila-guard-kbs paths=./kbs/... output:rbac:artifacts:config=config/kbs-rbac)
log "controller-gen: RBAC into components/attest/config/teeresources-rbac"
(cd "${REPO_ROOT}/components/attest" && "${CONTROLLER_GEN}" rbac:roleName=xila-guard-tee-resources paths=./teeresources/... output:rbac:artifacts:config=config/teeresources-rbac)

# The KubeVirt CRDs the GPU device policies and migration rules are tested
# against (no KubeVirt controller runs in the tests), and the core Pod
# schema their CEL is type-checked with, from the pinned KubeVirt API
# module and Kubernetes' own OpenAPI definitions.
log "kubevirt-crds: into components/gpudevices/config/kubevirt-crds and charts/testdata/schemas"
(cd "${REPO_ROOT}/hack/tools" && GOWORK=off go run ./kubevirt-crds \
  -crds "${REPO_ROOT}/components/gpudevices/config/kubevirt-crds" \
  -core-schemas "${REPO_ROOT}/charts/testdata/schemas")

# The chart's README: its values table, from values.yaml and its comments.
log "chart-readme: charts/xila-guard/README.md"
(cd "${REPO_ROOT}" && go run ./charts/cmd/chart-readme -chart charts/xila-guard)
