#!/usr/bin/env bash
# Builds the xilaguard Terraform provider (terraform/provider) into a local
# filesystem mirror, _output/terraform/mirror, links it into the examples,
# and writes a Terraform CLI configuration that installs providers from that
# mirror only, for configurations elsewhere:
#
#   export TF_CLI_CONFIG_FILE=$PWD/_output/terraform/terraform.rc
#
# The build is reproducible (-trimpath), so the mirror's checksum changes
# only when the provider's source does.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

out="${REPO_ROOT}/_output/terraform"
target="$(go env GOOS)_$(go env GOARCH)"
dir="${out}/mirror/registry.terraform.io/xila-guard/xilaguard/${TF_PROVIDER_VERSION}/${target}"
mkdir -p "${dir}"
ldflags="-s -w -X main.version=${TF_PROVIDER_VERSION}"
ldflags+=" -X github.com/xila-guard/xila-guard/terraform/provider/internal/kindlab.DefaultNodeImage=${NODE_IMAGE}"
ldflags+=" -X github.com/xila-guard/xila-guard/terraform/provider/internal/platform.KubeVersion=${KUBE_VERSION}"
timed "building terraform-provider-xilaguard ${TF_PROVIDER_VERSION}" \
  bash -c "cd terraform/provider && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags '${ldflags}' \
    -o '${dir}/terraform-provider-xilaguard_v${TF_PROVIDER_VERSION}' ."

cat >"${out}/terraform.rc.tmp" <<RC
# Written by make terraform-provider. Providers come from the local mirror
# only; no registry is asked.
provider_installation {
  filesystem_mirror {
    path    = "${out}/mirror"
    include = ["registry.terraform.io/xila-guard/xilaguard"]
  }
}
RC
mv "${out}/terraform.rc.tmp" "${out}/terraform.rc"

# The examples need no CLI configuration: with none, Terraform also looks
# for providers in terraform.d/plugins of the directory it was started in
# (before -chdir), so the mirror is linked there for the repository's root
# and for each example. The lab example loads the images make images
# tagged with this version into its cluster.
for dir in ./ terraform/examples/*/; do
  mkdir -p "${dir}terraform.d"
  ln -sfn "${out}/mirror" "${dir}terraform.d/plugins"
done
printf '# Written by make terraform-provider: the tag of the images it built.\nimage_tag = "%s"\n' "${XG_VERSION}" \
  >terraform/examples/lab/images.auto.tfvars
log "provider mirror: ${out}/mirror (linked as terraform.d/plugins of each example)"
log "lab: terraform -chdir=terraform/examples/lab init && terraform -chdir=terraform/examples/lab apply"
log "elsewhere: export TF_CLI_CONFIG_FILE=${out}/terraform.rc"
