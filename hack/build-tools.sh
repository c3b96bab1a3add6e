#!/usr/bin/env bash
# Builds, from Go modules only, every binary the project runs but does not
# write: Kubernetes (kubelet, kubeadm, kubectl, control plane, kube-proxy,
# agnhost), etcd, CoreDNS, crictl, helm, kind, controller-gen, staticcheck
# and, when none is installed, terraform.
# Each binary is cached under $XG_CACHE/bin by name and version and linked
# into _output/bin, so a second run builds nothing.
#
# usage: hack/build-tools.sh [name ...]   (default: all)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}/hack/tools"
export GOWORK=off CGO_ENABLED=0

KUBE_MINOR=${KUBE_VERSION#v1.}
KUBE_MINOR=${KUBE_MINOR%%.*}
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1"
  kube_ldflags+=" -X ${pkg}.gitMinor=${KUBE_MINOR} -X ${pkg}.gitTreeState=clean"
  kube_ldflags+=" -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
done

# name|module dir|package|version
TOOLS=(
  "kubelet|.|k8s.io/kubernetes/cmd/kubelet|${KUBE_VERSION}"
  "kubeadm|.|k8s.io/kubernetes/cmd/kubeadm|${KUBE_VERSION}"
  "kubectl|.|k8s.io/kubernetes/cmd/kubectl|${KUBE_VERSION}"
  "kube-apiserver|.|k8s.io/kubernetes/cmd/kube-apiserver|${KUBE_VERSION}"
  "kube-controller-manager|.|k8s.io/kubernetes/cmd/kube-controller-manager|${KUBE_VERSION}"
  "kube-scheduler|.|k8s.io/kubernetes/cmd/kube-scheduler|${KUBE_VERSION}"
  "kube-proxy|.|k8s.io/kubernetes/cmd/kube-proxy|${KUBE_VERSION}"
  "agnhost|.|k8s.io/kubernetes/test/images/agnhost|${KUBE_VERSION}"
  "etcd|.|go.etcd.io/etcd/server/v3|module"
  "kind|.|sigs.k8s.io/kind|${KIND_VERSION}"
  "helm|.|helm.sh/helm/v3/cmd/helm|${HELM_VERSION}"
  "controller-gen|.|sigs.k8s.io/controller-tools/cmd/controller-gen|${CONTROLLER_TOOLS_VERSION}"
  "staticcheck|.|honnef.co/go/tools/cmd/staticcheck|${STATICCHECK_VERSION}"
  "coredns|coredns|.|${COREDNS_VERSION}-k8s"
  "crictl|crictl|sigs.k8s.io/cri-tools/cmd/crictl|${CRICTL_VERSION}"
  # Volcano's scheduler, controller manager and admission webhook, for the
  # end-to-end suite (hack/tools/volcano says why it is its own module).
  "vc-scheduler|volcano|volcano.sh/volcano/cmd/scheduler|${VOLCANO_VERSION}"
  "vc-controller-manager|volcano|volcano.sh/volcano/cmd/controller-manager|${VOLCANO_VERSION}"
  "vc-webhook-manager|volcano|volcano.sh/volcano/cmd/webhook-manager|${VOLCANO_VERSION}"
  # The DRA example driver's kubelet plugin, for the end-to-end suite
  # (hack/tools/dra-example).
  "dra-example-kubeletplugin|dra-example|sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin|${DRA_EXAMPLE_VERSION}"
)

want=("$@")
selected() {
  [[ ${#want[@]} -eq 0 ]] && return 0
  local w
  for w in "${want[@]}"; do [[ $w == "$1" ]] && return 0; done
  return 1
}

mkdir -p "${XG_CACHE}/bin" "${XG_BIN}"
# One build at a time per cache: a second caller waits, then finds the
# binaries built.
exec 9>"${XG_CACHE}/bin/.lock"
flock 9
# Group the missing binaries by module so that one `go build` per module
# compiles their shared packages once.
declare -A missing_pkgs missing_names
for entry in "${TOOLS[@]}"; do
  IFS='|' read -r name dir pkg version <<<"${entry}"
  selected "${name}" || continue
  if [[ ${version} == module ]]; then
    version=$(cd "${dir}" && go list -m -f '{{.Version}}' "${pkg}")
  fi
  cached="${XG_CACHE}/bin/${name}@${version}"
  if [[ ! -x ${cached} ]]; then
    missing_pkgs[${dir}]+=" ${pkg}"
    missing_names[${dir}]+=" ${name}@${version}"
  fi
  ln -sfn "${cached}" "${XG_BIN}/${name}"
done

for dir in "${!missing_pkgs[@]}"; do
  require_free_space "${XG_CACHE}" 4
  tmp=$(mktemp -d "${XG_CACHE}/bin/.build.XXXXXX")
  trap 'rm -rf "${tmp}"' EXIT
  ldflags="-s -w"
  [[ ${dir} == . ]] && ldflags=${kube_ldflags}
  [[ ${dir} == volcano ]] && ldflags+=" -X volcano.sh/volcano/pkg/version.Version=${VOLCANO_VERSION}"
  timed "building${missing_names[${dir}]} (cold: several minutes)" \
    bash -c "cd '${dir}' && go build -trimpath -ldflags '${ldflags}' -o '${tmp}/' ${missing_pkgs[${dir}]}"
  # Binaries are named after the last path element of their package; etcd's
  # main package is its module root, so go names the binary "server".
  [[ -e ${tmp}/server ]] && mv "${tmp}/server" "${tmp}/etcd"
  # Volcano's binaries are named vc-<package>, as its own build names them.
  for nv in ${missing_names[${dir}]}; do
    name=${nv%@*}
    [[ ${name} == vc-* && ! -e ${tmp}/${name} ]] && mv "${tmp}/${name#vc-}" "${tmp}/${name}"
    mv "${tmp}/${name}" "${XG_CACHE}/bin/${nv}"
  done
  rm -rf "${tmp}"
  trap - EXIT
done
# Terraform: the one on PATH when it is TERRAFORM_VERSION, else built from
# its Go module. Terraform's go.mod replaces its internal backend modules
# with local directories, which `go install` refuses and the module zip
# leaves out, so the tree is assembled from the root module at the tag and
# each internal module at the tag's commit, all from the module proxy.
build_terraform() {
  local cached="${XG_CACHE}/bin/terraform@${TERRAFORM_VERSION}" have
  if have=$(command -v terraform) && [[ ${have} != "${XG_BIN}/terraform" ]] &&
    "${have}" version -json 2>/dev/null | grep -q "\"terraform_version\": \"${TERRAFORM_VERSION#v}\""; then
    ln -sfn "${have}" "${XG_BIN}/terraform"
    return
  fi
  if [[ ! -x ${cached} ]]; then
    require_free_space "${XG_CACHE}" 2
    local tmp root sub
    tmp=$(mktemp -d "${XG_CACHE}/bin/.build.XXXXXX")
    trap 'chmod -R u+w "${tmp}"; rm -rf "${tmp}"' EXIT
    root=$(go mod download -json "github.com/hashicorp/terraform@${TERRAFORM_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    cp -r "${root}" "${tmp}/src"
    chmod -R u+w "${tmp}/src"
    for sub in $(sed -n 's|^replace \(github.com/hashicorp/terraform/[^ ]*\) => \./.*|\1|p' "${tmp}/src/go.mod"); do
      local dir
      dir=$(go mod download -json "${sub}@${TERRAFORM_INTERNAL_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p') || true
      [[ -n ${dir} ]] || die "module ${sub}@${TERRAFORM_INTERNAL_VERSION} is not on the module proxy: check TERRAFORM_INTERNAL_VERSION in hack/versions.env"
      mkdir -p "${tmp}/src/${sub#github.com/hashicorp/terraform/}"
      cp -r "${dir}/." "${tmp}/src/${sub#github.com/hashicorp/terraform/}/"
    done
    chmod -R u+w "${tmp}/src"
    # Its godebug lines name settings that newer Go releases removed
    # (tlskyber), which makes the go command refuse the module.
    sed -i '/^godebug /d' "${tmp}/src/go.mod"
    timed "building terraform@${TERRAFORM_VERSION} (cold: a few minutes)" \
      bash -c "cd '${tmp}/src' && go build -trimpath -ldflags '-s -w' -o '${tmp}/terraform' ."
    mv "${tmp}/terraform" "${cached}"
    chmod -R u+w "${tmp}"
    rm -rf "${tmp}"
    trap - EXIT
  fi
  ln -sfn "${cached}" "${XG_BIN}/terraform"
}
if selected terraform; then
  build_terraform
fi
log "tools ready in ${XG_BIN}"
