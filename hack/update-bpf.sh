#!/usr/bin/env bash
# Regenerates the agent's eBPF object and its Go bindings from bpf/ with
# bpf2go (pinned as a tool in components/agent/go.mod). The output is
# committed; `make verify` runs this and fails on any difference, so the
# object in git is always the one the sources produce.
#
# Needs clang and llvm-strip of the major version CLANG_MAJOR pins in
# hack/versions.env, and the libbpf headers (hack/ensure-packages.sh):
#   apt-get install clang-${CLANG_MAJOR} llvm-${CLANG_MAJOR} libbpf-dev
# The versioned binaries (clang-${CLANG_MAJOR}, llvm-strip-${CLANG_MAJOR})
# are used when present, the unversioned ones only when their major matches.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ ${CLANG_MAJOR:-} =~ ^[0-9]+$ ]] || die "CLANG_MAJOR in hack/versions.env is '${CLANG_MAJOR:-}', not a major version number"
install_hint="apt-get install clang-${CLANG_MAJOR} llvm-${CLANG_MAJOR} libbpf-dev"

# major prints the major version a clang or llvm-strip binary reports.
major() {
  { "$1" --version 2>/dev/null || true; } | sed -n 's/.*\(clang\|LLVM\) version \([0-9][0-9]*\)\..*/\2/p;T;q'
}

# pinned prints the binary of tool (clang, llvm-strip) at CLANG_MAJOR, or
# fails naming the pin and how to install it.
pinned() {
  local tool=$1 bin found=""
  for bin in "${tool}-${CLANG_MAJOR}" "${tool}"; do
    command -v "${bin}" >/dev/null || continue
    local m
    m=$(major "${bin}")
    [[ ${m} == "${CLANG_MAJOR}" ]] && { command -v "${bin}"; return; }
    found+="; ${bin} is ${m:-of unknown version}"
  done
  die "${tool} ${CLANG_MAJOR} (CLANG_MAJOR in hack/versions.env, the major the committed eBPF object is built with) not found${found}: ${install_hint}"
}

cc=$(pinned clang)
strip=$(pinned llvm-strip)
[[ -f /usr/include/bpf/bpf_helpers.h ]] || die "libbpf headers not found: ${install_hint}"

cd "${REPO_ROOT}/components/agent"
# The agent module alone pins bpf2go; leaving the workspace out keeps the
# generator independent of the other modules' state.
GOWORK=off BPF2GO_CC="${cc}" BPF2GO_STRIP="${strip}" \
  timed "bpf2go (${cc}: $("${cc}" --version | head -n 1))" go generate ./internal/bpfobj/
