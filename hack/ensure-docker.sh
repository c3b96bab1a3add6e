#!/usr/bin/env bash
# Makes sure a Docker engine answers. Where one already works this changes
# nothing. Otherwise it installs Debian's docker.io, gives dockerd a default
# runtime that only asks runc for capabilities this machine can grant (see
# hack/tools/runcwrap), starts dockerd in the background and waits for it.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Every kind node runs systemd, kubelet and kube-proxy, each holding inotify
# instances; with more than one cluster the common default of 128 instances
# runs out and kube-proxy fails with "too many open files". Raise the limits,
# never lower them.
raise_sysctl() {
  local key=$1 want=$2 have
  have=$(sysctl -n "${key}" 2>/dev/null) || return 0
  if (( have < want )); then
    as_root sysctl -q -w "${key}=${want}" >/dev/null ||
      log "warning: cannot raise ${key} from ${have} to ${want}; several kind clusters at once may fail"
  fi
}
raise_sysctl fs.inotify.max_user_instances 512
raise_sysctl fs.inotify.max_user_watches 524288

if docker info >/dev/null 2>&1; then
  exit 0
fi

DOCKER_LOG=${DOCKER_LOG:-/var/log/xila-guard-dockerd.log}
WRAPPER=/usr/local/sbin/xg-runc

if ! command -v dockerd >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 ||
    die "no Docker daemon answers and apt-get is missing: install and start Docker (https://docs.docker.com/engine/install/), then retry"
  timed "installing docker.io from Debian" \
    as_root env DEBIAN_FRONTEND=noninteractive bash -c \
    'apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends docker.io >/dev/null' ||
    die "apt-get install docker.io failed: check the Debian mirror in /etc/apt/sources.list, or install Docker yourself"
fi

# A systemd host runs dockerd as a service; start that and stop here.
if [[ -d /run/systemd/system ]] && as_root systemctl start docker 2>/dev/null && docker info >/dev/null 2>&1; then
  exit 0
fi

log "building the capability-safe runc wrapper"
tmpbin=$(mktemp)
(cd "${REPO_ROOT}/hack/tools" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "${tmpbin}" ./runcwrap)
as_root install -m 0755 "${tmpbin}" "${WRAPPER}"
rm -f "${tmpbin}"

as_root mkdir -p /etc/docker
if [[ ! -s /etc/docker/daemon.json ]]; then
  as_root tee /etc/docker/daemon.json >/dev/null <<JSON
{
  "runtimes": {"xg-runc": {"path": "${WRAPPER}"}},
  "default-runtime": "xg-runc",
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m", "max-file": "2"}
}
JSON
fi

# The machine may lack a mounted cgroup hierarchy or iptables modules that
# dockerd expects; dockerd reports those itself in its log.
log "starting dockerd (log: ${DOCKER_LOG})"
# dockerd outlives this script: it keeps no descriptor but its log, so a
# lock the caller holds (flock) is released when the caller ends.
as_root bash -c "for fd in /proc/\$\$/fd/*; do fd=\${fd##*/}; [[ \$fd -gt 2 ]] && eval \"exec \$fd>&-\" 2>/dev/null; done; nohup dockerd >>'${DOCKER_LOG}' 2>&1 </dev/null &"
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    log "dockerd is up"
    exit 0
  fi
  sleep 1
done
die "dockerd did not answer within 60s: see the last lines of ${DOCKER_LOG} (tail ${DOCKER_LOG}) and fix what it reports"
