#!/usr/bin/env bash
# Runs make targets one after the other, as make test's phases, prints how
# long each took as it ends, and a table of all of them at the end (also
# when one fails, which stops the run).
#
# usage: hack/run-phases.sh target ...
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

declare -a rows
summary() {
  local rc=$?
  echo
  echo "phase            seconds  result"
  printf '%s\n' "${rows[@]}"
  exit "${rc}"
}
trap summary EXIT
start_all=${SECONDS}
for target in "$@"; do
  start=${SECONDS}
  log "phase ${target} ..."
  if make --no-print-directory "${target}"; then
    result=ok
  else
    result=FAILED
  fi
  rows+=("$(printf '%-16s %7d  %s' "${target}" $((SECONDS - start)) "${result}")")
  log "phase ${target}: ${result} in $((SECONDS - start))s"
  [[ ${result} == ok ]] || exit 1
done
rows+=("$(printf '%-16s %7d' total $((SECONDS - start_all)))")
