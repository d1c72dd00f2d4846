#!/usr/bin/env bash
# Installs, as root, the Debian packages a real node of the local fleet needs (test/node) when
# any is missing: containerd, runc, CNI plugins, iptables, nftables, conntrack; and the ones the
# node's Argo CD and Redis images are assembled from (test/node/rootfs.go copies their installed
# files): git, openssh-client, gpg, tini, redis-server and the rest Argo CD's own image holds.
# Their services must not start (the fleet runs its own containerd per node, nothing may touch
# the host's networking, and redis-server only provides files for an image), so a policy-rc.d
# that refuses every start is in place during the install; an existing one is kept as it was.
set -euo pipefail

PACKAGES=(containerd runc containernetworking-plugins iptables nftables conntrack)
# For the images (test/node BuildArgoCDImage, BuildRedisImage); redis-tools comes with
# redis-server and gives the tests redis-cli.
PACKAGES+=(git git-lfs openssh-client gnupg gpg gpg-agent tini ca-certificates tzdata connect-proxy redis-server)
POLICY=/usr/sbin/policy-rc.d

log() { echo "node-packages: $*" >&2; }

if [[ "$(id -u)" != 0 ]]; then
  log "must run as root (it installs Debian packages); run: sudo $0"
  exit 1
fi

# Every kubelet (its cAdvisor), containerd and many of the fleet's other processes take inotify
# instances, 128 a user by Debian's default: with several nodes beside the rest of the suite a
# kubelet fails to start ("inotify_init: too many open files"). Raised for this boot only, as
# kind's documentation advises for its nodes, never lowered.
min_instances=1024
if (($(sysctl -n fs.inotify.max_user_instances) < min_instances)); then
  sysctl -q -w fs.inotify.max_user_instances="${min_instances}"
  log "fs.inotify.max_user_instances raised to ${min_instances} (until reboot)"
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  log "all installed: ${PACKAGES[*]}"
  exit 0
fi

saved=""
if [[ -e "${POLICY}" ]]; then
  saved="$(mktemp)"
  cp -a "${POLICY}" "${saved}"
fi
restore() {
  if [[ -n "${saved}" ]]; then
    cp -a "${saved}" "${POLICY}"
    rm -f "${saved}"
  else
    rm -f "${POLICY}"
  fi
}
trap restore EXIT
# 101: action forbidden, so invoke-rc.d starts nothing.
printf '#!/bin/sh\nexit 101\n' >"${POLICY}"
chmod 755 "${POLICY}"

log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
log "installed ${missing[*]}"
