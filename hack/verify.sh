#!/usr/bin/env bash
# Fails when generated files (Go pins, deepcopy, CRDs, eBPF objects) differ
# from what the generators produce now. The generators run on a copy of the
# working tree, so uncommitted work is neither needed nor touched.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

copy=$(mktemp -d "${TMPDIR:-/tmp}/xg-verify.XXXXXX")
trap 'rm -rf "${copy}"' EXIT
# Tracked files deleted in the working tree are not part of it.
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    if [[ -e ${f} || -L ${f} ]]; then printf '%s\0' "${f}"; fi
  done |
  xargs -0 cp -a --parents -t "${copy}"
marker="${copy}/.xg-verify-marker"
touch "${marker}"
(
  cd "${copy}"
  export XG_BIN # generators use the tools already built in this clone
  hack/update-pins.sh
  hack/update-codegen.sh
  hack/update-bpf.sh
)
stale=()
while IFS= read -r -d '' f; do
  f=${f#"${copy}/"}
  # go.work.sum is a checksum cache any go command may extend, not output.
  [[ ${f} == go.work.sum ]] && continue
  cmp -s "${copy}/${f}" "${REPO_ROOT}/${f}" || stale+=("${f}")
done < <(find "${copy}" -type f -newer "${marker}" -print0)
if [[ ${#stale[@]} -gt 0 ]]; then
  printf 'stale: %s\n' "${stale[@]}" >&2
  die "generated files are stale: run 'make generate' and commit the result"
fi
log "generated files are current"
