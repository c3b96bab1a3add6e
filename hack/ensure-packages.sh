#!/usr/bin/env bash
# Installs, from Debian, the build packages the suite needs when they are
# missing: clang and llvm of the major hack/versions.env pins (CLANG_MAJOR)
# and the libbpf headers (eBPF objects), iproute2 and iptables
# (network-namespace and Service tests) and debootstrap (node image).
# Present ones are left alone.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

declare -A probe=(
  [clang-${CLANG_MAJOR}]="command -v clang-${CLANG_MAJOR}"
  [llvm-${CLANG_MAJOR}]="command -v llvm-strip-${CLANG_MAJOR}"
  [libbpf-dev]="test -f /usr/include/bpf/bpf_helpers.h"
  [iproute2]="command -v ip"
  [iptables]="command -v ip6tables"
  [debootstrap]="command -v debootstrap"
)
missing=()
for pkg in "${!probe[@]}"; do
  bash -c "${probe[${pkg}]}" >/dev/null 2>&1 || missing+=("${pkg}")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

command -v apt-get >/dev/null 2>&1 ||
  die "missing ${missing[*]} and no apt-get: install them with your package manager"
timed "installing ${missing[*]} from Debian" \
  as_root env DEBIAN_FRONTEND=noninteractive bash -c \
  "apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends ${missing[*]} >/dev/null 2>&1" ||
  die "apt-get could not install ${missing[*]}: check the Debian mirror in /etc/apt/sources.list"
