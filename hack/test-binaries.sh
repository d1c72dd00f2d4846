#!/usr/bin/env bash
# Prints a directory holding kube-apiserver, etcd and kube-controller-manager for envtest
# and the local fleet. Order: $KUBEBUILDER_ASSETS if set; else the shared cache (hack/lib/binary-cache.sh) or bin/; else
# build them from the Go module proxy and cache the result. Progress goes to stderr, the
# directory alone to stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_VERSION="${K8S_VERSION:-1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-3.6.8}"
GOOS_GOARCH="$(go env GOOS)-$(go env GOARCH)"
BINARIES=(kube-apiserver kube-controller-manager etcd)

log() { echo "test-binaries: $*" >&2; }

# shellcheck source=lib/binary-cache.sh
source "${ROOT}/hack/lib/binary-cache.sh"
# shellcheck source=lib/k8s-module.sh
source "${ROOT}/hack/lib/k8s-module.sh"
binary_cache_at "k8s/${K8S_VERSION}-${GOOS_GOARCH}"
binary_cache_enter "${KUBEBUILDER_ASSETS:-}"

WORK="${BUILD_DIR}/k8s-${K8S_VERSION}"
mkdir -p "${WORK}"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

if [[ ! -x "${OUT}/kube-apiserver" || ! -x "${OUT}/kube-controller-manager" ]]; then
  log "building kube-apiserver and kube-controller-manager v${K8S_VERSION} from the Go module proxy (first time only, several minutes)"
  k8s_module_setup "${WORK}" "${K8S_VERSION}"
  (
    cd "${WORK}"
    for b in kube-apiserver kube-controller-manager; do
      log "go build k8s.io/kubernetes/cmd/${b}"
      go build -trimpath -ldflags "${K8S_LDFLAGS}" -o "${OUT}/${b}.tmp" "k8s.io/kubernetes/cmd/${b}"
      mv "${OUT}/${b}.tmp" "${OUT}/${b}"
    done
  )
fi

if [[ ! -x "${OUT}/etcd" ]]; then
  log "building etcd v${ETCD_VERSION} from the Go module proxy"
  EWORK="${BUILD_DIR}/etcd-${ETCD_VERSION}"
  mkdir -p "${EWORK}"
  printf 'module local/etcd-binary\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "${ETCD_VERSION}" >"${EWORK}/go.mod"
  printf 'package main\n' >"${EWORK}/doc.go"
  rm -f "${EWORK}/go.sum"
  (
    cd "${EWORK}"
    go build -trimpath -ldflags "-s -w" -o "${OUT}/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "${OUT}/etcd.tmp" "${OUT}/etcd"
  )
fi

binary_cache_ready
log "binaries ready in ${OUT}"
echo "${OUT}"
