#!/usr/bin/env bash
# Builds the kind node image $NODE_IMAGE with no registry: a Debian root
# filesystem from debootstrap, kind's base files from the kind module,
# Kubernetes binaries from hack/build-tools.sh, and every image kubeadm asks
# for preloaded into the node's containerd. The image is tagged only once it
# is complete, and carries a hash of its inputs so an unchanged build is
# skipped.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

NODE_PACKAGES=(
  systemd systemd-sysv dbus iptables iproute2 mount kmod conntrack ethtool
  socat util-linux procps libseccomp2 ca-certificates containerd runc
  containernetworking-plugins jq
)

inputs_hash() {
  {
    cat hack/versions.env hack/lib.sh "${BASH_SOURCE[0]}"
    find hack/kind-node hack/tools/runcwrap hack/tools/pause -type f -print0 | sort -z | xargs -0 cat
  } | sha256sum | cut -c1-16
}

HASH=$(inputs_hash)
if [[ $(docker image inspect -f '{{index .Config.Labels "xila-guard.inputs"}}' "${NODE_IMAGE}" 2>/dev/null) == "${HASH}" ]]; then
  log "node image ${NODE_IMAGE} is up to date"
  exit 0
fi

require_free_space "${XG_CACHE}" 4
require_free_space "$(docker info -f '{{.DockerRootDir}}')" 6

WORK=$(mktemp -d "${TMPDIR:-/tmp}/xg-node.XXXXXX")
BUILD_CONTAINER="xg-node-build-$$"
BUILD_TAG="xila-guard/kind-node-build:${HASH}"
cleanup() {
  docker rm -f "${BUILD_CONTAINER}" >/dev/null 2>&1 || true
  docker rmi "${BUILD_TAG}" >/dev/null 2>&1 || true
  rm -rf "${WORK}"
}
trap cleanup EXIT

# 1. Root filesystem, cached by suite and package list.
pkg_hash=$(printf '%s\n' "${NODE_DEBIAN_SUITE}" "${NODE_PACKAGES[@]}" | sha256sum | cut -c1-12)
ROOTFS_IMAGE="xila-guard/node-rootfs:${NODE_DEBIAN_SUITE}-${pkg_hash}"
if ! docker image inspect "${ROOTFS_IMAGE}" >/dev/null 2>&1; then
  rootfs_tar="${XG_CACHE}/node-rootfs/${NODE_DEBIAN_SUITE}-${pkg_hash}.tar"
  if [[ ! -s ${rootfs_tar} ]]; then
    command -v debootstrap >/dev/null 2>&1 ||
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
      die "debootstrap is missing and apt-get could not install it: apt-get install debootstrap"
    mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
    rootfs="${WORK}/rootfs"
    timed "debootstrap ${NODE_DEBIAN_SUITE} from ${mirror}" \
      as_root debootstrap --variant=minbase --include="$(IFS=,; echo "${NODE_PACKAGES[*]}")" \
      "${NODE_DEBIAN_SUITE}" "${rootfs}" "${mirror}" >"${WORK}/debootstrap.log" 2>&1 || {
      tail -n 5 "${WORK}/debootstrap.log" >&2
      die "debootstrap failed: check that ${mirror} is reachable, or set DEBIAN_MIRROR to a Debian mirror that is"
    }
    as_root rm -rf "${rootfs}/var/cache/apt/archives/"*.deb "${rootfs}/var/lib/apt/lists/"*
    mkdir -p "$(dirname "${rootfs_tar}")"
    as_root tar -C "${rootfs}" --numeric-owner -cf "${rootfs_tar}.tmp" .
    mv "${rootfs_tar}.tmp" "${rootfs_tar}"
    as_root rm -rf "${rootfs}"
  fi
  timed "importing the root filesystem as ${ROOTFS_IMAGE}" \
    docker import "${rootfs_tar}" "${ROOTFS_IMAGE}" >/dev/null
fi

"${REPO_ROOT}/hack/build-tools.sh" kubelet kubeadm kubectl kube-apiserver \
  kube-controller-manager kube-scheduler kube-proxy etcd coredns crictl agnhost kind
mkdir -p "${WORK}/bin"
for b in kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns crictl agnhost; do
  cp "$(readlink -f "${XG_BIN}/${b}")" "${WORK}/bin/${b}"
done
(cd hack/tools && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${WORK}/bin/xg-runc" ./runcwrap &&
  GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${WORK}/bin/pause" ./pause)

# 2. The images kubeadm asks for, plus agnhost for the end-to-end suite.
# scratch_image TAG BINARY [ENTRYPOINT(any value = the binary)] [BASE]
scratch_image() {
  local tag=$1 bin=$2 entry=${3:-} ctx
  ctx="${WORK}/img-${bin}"
  mkdir -p "${ctx}"
  cp "${WORK}/bin/${bin}" "${ctx}/${bin}"
  {
    echo "FROM ${4:-scratch}"
    echo "COPY ${bin} /usr/local/bin/${bin}"
    echo "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    [[ -n ${entry} ]] && echo "ENTRYPOINT [\"/usr/local/bin/${bin}\"]"
  } >"${ctx}/Dockerfile"
  docker_build -q -t "${tag}" "${ctx}" >/dev/null
}
log "building the Kubernetes images (FROM scratch)"
K=registry.k8s.io
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  scratch_image "${K}/${c}:${KUBE_VERSION}" "${c}"
done
scratch_image "${K}/kube-proxy:${KUBE_VERSION}" kube-proxy "" "${ROOTFS_IMAGE}"
scratch_image "${K}/etcd:${ETCD_IMAGE_TAG}" etcd
# kubeadm's CoreDNS deployment relies on the image entrypoint /coredns.
mkdir -p "${WORK}/img-coredns-root"
cp "${WORK}/bin/coredns" "${WORK}/img-coredns-root/coredns"
printf 'FROM scratch\nCOPY coredns /coredns\nENTRYPOINT ["/coredns"]\n' >"${WORK}/img-coredns-root/Dockerfile"
docker_build -q -t "${K}/coredns/coredns:${COREDNS_VERSION}" "${WORK}/img-coredns-root" >/dev/null
scratch_image "${K}/pause:${PAUSE_IMAGE_TAG}" pause entry
docker tag "${K}/pause:${PAUSE_IMAGE_TAG}" "${K}/pause:3.10"
scratch_image "${AGNHOST_IMAGE}" agnhost entry
PRELOAD=(
  "${K}/kube-apiserver:${KUBE_VERSION}" "${K}/kube-controller-manager:${KUBE_VERSION}"
  "${K}/kube-scheduler:${KUBE_VERSION}" "${K}/kube-proxy:${KUBE_VERSION}"
  "${K}/etcd:${ETCD_IMAGE_TAG}" "${K}/coredns/coredns:${COREDNS_VERSION}"
  "${K}/pause:${PAUSE_IMAGE_TAG}" "${K}/pause:3.10" "${AGNHOST_IMAGE}"
)
timed "saving ${#PRELOAD[@]} images" docker save -o "${WORK}/images.tar" "${PRELOAD[@]}"

# 3. The node image itself, from kind's base files and this repository's.
ctx="${WORK}/node"
kind_dir=$(cd hack/tools && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
mkdir -p "${ctx}"
cp -r "${kind_dir}/images/base/files" "${ctx}/kind-base"
rm -rf "${ctx}/kind-base/LICENSES"
cp -r hack/kind-node/files "${ctx}/overlay"
cp -r "${WORK}/bin" "${ctx}/bin"
chmod -R u+w,a+rX "${ctx}"
cat >"${ctx}/Dockerfile" <<DOCKERFILE
FROM ${ROOTFS_IMAGE}
COPY kind-base/ /
COPY overlay/ /
COPY bin/kubelet bin/kubeadm bin/kubectl /usr/bin/
COPY bin/crictl /usr/local/bin/crictl
COPY bin/xg-runc /usr/local/sbin/xg-runc
RUN set -eu; \
    chmod 0755 /usr/local/bin/* /usr/local/sbin/xg-runc /kind/bin /kind/bin/*; \
    ln -sf /usr/bin/containerd /usr/local/bin/containerd; \
    mkdir -p /opt/cni /etc/cni/net.d /etc/kubernetes/manifests; ln -sfn /usr/lib/cni /opt/cni/bin; \
    find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete; \
    rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*; \
    echo ReadKMsg=no >>/etc/systemd/journald.conf; \
    systemctl enable kubelet.service containerd.service undo-mount-hacks.service; \
    systemctl mask systemd-binfmt.service; \
    ctr oci spec | jq '.hooks.createContainer += [{"path": "/kind/bin/mount-product-files.sh"}] | del(.process.rlimits)' \
      >/etc/containerd/cri-base.json; \
    echo "${KUBE_VERSION}" >/kind/version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
DOCKERFILE
timed "assembling the node file system" \
  docker_build -q -t "${BUILD_TAG}" "${ctx}" >/dev/null

# 4. Preload the images into the node's containerd, then commit. Images are
# imported unpacked-later (--no-unpack): the node's own snapshotter unpacks
# them on first use.
docker run -d --name "${BUILD_CONTAINER}" --entrypoint /bin/sleep "${BUILD_TAG}" infinity >/dev/null
docker cp "${WORK}/images.tar" "${BUILD_CONTAINER}:/images.tar"
timed "preloading images into the node's containerd" \
  docker exec "${BUILD_CONTAINER}" bash -euc '
    containerd >/tmp/containerd.log 2>&1 &
    for _ in $(seq 1 100); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done
    ctr -n k8s.io images import --no-unpack --all-platforms /images.tar >/dev/null
    # Pinned images are never garbage-collected by the kubelet.
    for ref in $(ctr -n k8s.io images ls -q); do
      ctr -n k8s.io images label "${ref}" io.cri-containerd.pinned=pinned >/dev/null
    done
    kill %1; wait || true
    rm -f /images.tar /tmp/containerd.log'
docker commit \
  --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  --change 'CMD []' \
  --change "LABEL xila-guard.inputs=${HASH} xila-guard.kubernetes=${KUBE_VERSION}" \
  "${BUILD_CONTAINER}" "${NODE_IMAGE}" >/dev/null
log "node image ${NODE_IMAGE} built"
