#!/usr/bin/env bash
# Times terraform apply, a plan right after it (no changes) and destroy of
# the lab example against the same cluster made by make kind-up plus helm
# upgrade --install (the baseline), RUNS times each, and prints the medians.
# "warm" starts with the node image present. With COLD=1 each run first deletes the node image, so that the
# cold apply includes make kind-image (from the cached root filesystem);
# do not do that while other clusters on the machine use the image.
#
# usage: [COLD=1] hack/terraform-bench.sh [RUNS]   (needs make terraform-provider images kind-image)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

RUNS=${1:-3}
export TF_CLI_CONFIG_FILE="${REPO_ROOT}/_output/terraform/terraform.rc"
cluster=xg-tf-bench
work=$(mktemp -d "${TMPDIR:-/tmp}/xg-tf-bench.XXXXXX")
# Whatever happens, leave no cluster behind.
trap '"${XG_BIN}/kind" delete cluster --name "${cluster}" >/dev/null 2>&1 || true; rm -rf "${work}"' EXIT
# A local module source must be relative (./ or ../): Terraform copies a
# module given by absolute path, and its own ../.. would then miss the
# repository.
lab=$(realpath --relative-to="${work}" "${REPO_ROOT}/terraform/examples/lab")
cat >"${work}/main.tf" <<TF
module "lab" {
  source       = "${lab}"
  cluster_name = "${cluster}"
  image_tag    = "${XG_VERSION}"
}
TF
tf() { "${XG_BIN}/terraform" -chdir="${work}" "$@" >/dev/null; }
secs() { local t0=$1; echo $(($(date +%s%N) / 1000000 - t0)); }
now() { echo $(($(date +%s%N) / 1000000)); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

tf init -input=false
cold=() warm=() plan=() destroy=() base_up=() base_down=()
for ((i = 0; i < RUNS; i++)); do
  if [[ ${COLD:-0} == 1 ]]; then
    docker rmi -f "${NODE_IMAGE}" >/dev/null
    t=$(now); make -s kind-image >/dev/null; tf apply -auto-approve -input=false; cold+=("$(secs "$t")")
    t=$(now); tf destroy -auto-approve -input=false; destroy+=("$(secs "$t")")
  fi
  t=$(now); tf apply -auto-approve -input=false; warm+=("$(secs "$t")")
  # -detailed-exitcode: 0 is no changes, 2 is changes (a failure here).
  t=$(now); tf plan -input=false -detailed-exitcode; plan+=("$(secs "$t")")
  t=$(now); tf destroy -auto-approve -input=false; destroy+=("$(secs "$t")")
  # Baseline: the same cluster, CRDs and release with the project's
  # scripts, kubectl and the helm CLI.
  t=$(now)
  CLUSTER_NAME=${cluster} KIND_KUBECONFIG="${work}/kubeconfig" hack/kind-up.sh >/dev/null 2>&1
  for c in core scheduler webhook; do "${XG_BIN}/kind" load docker-image --name "${cluster}" "xila-guard/${c}:${XG_VERSION}" >/dev/null 2>&1; done
  "${XG_BIN}/kubectl" --kubeconfig "${work}/kubeconfig" apply --server-side -f components/api/config/crd >/dev/null
  "${XG_BIN}/kubectl" --kubeconfig "${work}/kubeconfig" wait --for=condition=Established --timeout=60s \
    crd/placementpolicies.guard.xila.us crd/tenantbindings.guard.xila.us crd/nodesecuritystates.guard.xila.us >/dev/null
  "${XG_BIN}/helm" --kubeconfig "${work}/kubeconfig" upgrade --install xila-guard charts/xila-guard -n xila-guard-system --create-namespace --wait --timeout 5m \
    --set enforcement.enabled=true,enforcement.profile=lab,enforcement.core.replicas=1,webhook.replicas=1,image.tag="${XG_VERSION}" \
    --set-json 'orchestratorIntegrations=[{"name":"volcano","schedulerName":"volcano","workloadSelector":{"matchExpressions":[{"key":"volcano.sh/job-name","operator":"Exists"}]}},{"name":"kai","schedulerName":"kai-scheduler","workloadSelector":{"matchExpressions":[{"key":"kai.scheduler/queue","operator":"Exists"}]}}]' >/dev/null
  base_up+=("$(secs "$t")")
  t=$(now); CLUSTER_NAME=${cluster} KIND_KUBECONFIG="${work}/kubeconfig" hack/kind-down.sh >/dev/null 2>&1; base_down+=("$(secs "$t")")
  log "run $((i + 1)): warm apply ${warm[i]} ms, plan ${plan[i]} ms, destroy ${destroy[-1]} ms, baseline up ${base_up[i]} ms, baseline down ${base_down[i]} ms"
done
if [[ ${COLD:-0} == 1 ]]; then
  printf 'apply cold (kind-image + apply): median %s ms of %s\n' "$(printf '%s\n' "${cold[@]}" | median)" "${RUNS}"
fi
printf 'apply warm (node image cached):  median %s ms of %s\n' "$(printf '%s\n' "${warm[@]}" | median)" "${RUNS}"
printf 'plan, no changes:                median %s ms\n' "$(printf '%s\n' "${plan[@]}" | median)"
printf 'destroy:                         median %s ms\n' "$(printf '%s\n' "${destroy[@]}" | median)"
printf 'baseline kind-up + helm install: median %s ms\n' "$(printf '%s\n' "${base_up[@]}" | median)"
printf 'baseline kind-down:              median %s ms\n' "$(printf '%s\n' "${base_down[@]}" | median)"
