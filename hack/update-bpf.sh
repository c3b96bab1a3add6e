#!/usr/bin/env bash
# Regenerates the agent's eBPF object and its Go bindings from bpf/ with
# bpf2go (pinned as a tool in components/agent/go.mod). The output is
# committed; `make verify` runs this and fails on any difference, so the
# object in git is always the one the sources produce.
#
# Needs clang, llvm-strip and the libbpf headers:
#   apt-get install clang llvm libbpf-dev
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for tool in clang llvm-strip; do
  command -v "${tool}" >/dev/null || die "${tool} not found: apt-get install clang llvm libbpf-dev"
done
[[ -f /usr/include/bpf/bpf_helpers.h ]] || die "libbpf headers not found: apt-get install libbpf-dev"

cd "${REPO_ROOT}/components/agent"
# The agent module alone pins bpf2go; leaving the workspace out keeps the
# generator independent of the other modules' state.
GOWORK=off timed "bpf2go ($(clang --version | head -n 1))" go generate ./internal/bpfobj/
