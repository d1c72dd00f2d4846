#!/usr/bin/env bash
# Prints a directory holding kubelet, kube-proxy and kube-scheduler for the local fleet's real
# nodes (test/node). Order: $NODE_BINARIES_DIR if set; else the shared cache
# (hack/lib/binary-cache.sh) or bin/; else build them from the Go module proxy with the same
# module setup as hack/test-binaries.sh (hack/lib/k8s-module.sh) and cache the result.
# Progress goes to stderr, the directory alone to stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_VERSION="${K8S_VERSION:-1.36.3}"
GOOS_GOARCH="$(go env GOOS)-$(go env GOARCH)"
BINARIES=(kubelet kube-proxy kube-scheduler)

log() { echo "node-binaries: $*" >&2; }

# shellcheck source=lib/binary-cache.sh
source "${ROOT}/hack/lib/binary-cache.sh"
# shellcheck source=lib/k8s-module.sh
source "${ROOT}/hack/lib/k8s-module.sh"
binary_cache_at "k8s-node/${K8S_VERSION}-${GOOS_GOARCH}"
binary_cache_enter "${NODE_BINARIES_DIR:-}"

# Its own build folder: hack/test-binaries.sh may rewrite its go.mod under its own lock at the
# same time. The Go build cache is shared, so the common packages compile once.
WORK="${BUILD_DIR}/k8s-node-${K8S_VERSION}"
mkdir -p "${WORK}"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

log "building kubelet, kube-proxy and kube-scheduler v${K8S_VERSION} from the Go module proxy (first time only, several minutes)"
k8s_module_setup "${WORK}" "${K8S_VERSION}"
(
  cd "${WORK}"
  for b in "${BINARIES[@]}"; do
    [[ -x "${OUT}/${b}" ]] && continue
    log "go build k8s.io/kubernetes/cmd/${b}"
    go build -trimpath -ldflags "${K8S_LDFLAGS}" -o "${OUT}/${b}.tmp" "k8s.io/kubernetes/cmd/${b}"
    mv "${OUT}/${b}.tmp" "${OUT}/${b}"
  done
)

binary_cache_ready
log "binaries ready in ${OUT}"
echo "${OUT}"
