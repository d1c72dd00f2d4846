#!/usr/bin/env bash
# Prints a directory holding kubelet, kube-proxy, kube-scheduler and coredns for the local
# fleet's real nodes (test/node). Order: $NODE_BINARIES_DIR if set; else the shared cache
# (hack/lib/binary-cache.sh) or bin/; else build them from the Go module proxy with the same
# module setup as hack/test-binaries.sh (hack/lib/k8s-module.sh) and cache the result.
# Progress goes to stderr, the directory alone to stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_VERSION="${K8S_VERSION:-1.36.3}"
# The CoreDNS kubeadm v1.36.3 deploys (cmd/kubeadm/app/constants: CoreDNSVersion).
COREDNS_VERSION="${COREDNS_VERSION:-1.14.2}"
GOOS_GOARCH="$(go env GOOS)-$(go env GOARCH)"
K8S_BINARIES=(kubelet kube-proxy kube-scheduler)
BINARIES=("${K8S_BINARIES[@]}" coredns)
# The folder is keyed by the Kubernetes version only: a stamp names the CoreDNS build, so a
# new COREDNS_VERSION rebuilds coredns alone.
COREDNS_STAMP="coredns-v${COREDNS_VERSION}.built"
CACHE_FILES=("${COREDNS_STAMP}")

log() { echo "node-binaries: $*" >&2; }

# shellcheck source=lib/binary-cache.sh
source "${ROOT}/hack/lib/binary-cache.sh"
# shellcheck source=lib/k8s-module.sh
source "${ROOT}/hack/lib/k8s-module.sh"
binary_cache_at "k8s-node/${K8S_VERSION}-${GOOS_GOARCH}"
binary_cache_enter "${NODE_BINARIES_DIR:-}"

export GOFLAGS=-mod=mod
export CGO_ENABLED=0

missing=()
for b in "${K8S_BINARIES[@]}"; do
  [[ -x "${OUT}/${b}" ]] || missing+=("${b}")
done
if ((${#missing[@]} > 0)); then
  # Its own build folder: hack/test-binaries.sh may rewrite its go.mod under its own lock at
  # the same time. The Go build cache is shared, so the common packages compile once.
  WORK="${BUILD_DIR}/k8s-node-${K8S_VERSION}"
  mkdir -p "${WORK}"
  log "building ${missing[*]} v${K8S_VERSION} from the Go module proxy (first time only, several minutes)"
  k8s_module_setup "${WORK}" "${K8S_VERSION}"
  (
    cd "${WORK}"
    for b in "${missing[@]}"; do
      log "go build k8s.io/kubernetes/cmd/${b}"
      go build -trimpath -ldflags "${K8S_LDFLAGS}" -o "${OUT}/${b}.tmp" "k8s.io/kubernetes/cmd/${b}"
      mv "${OUT}/${b}.tmp" "${OUT}/${b}"
    done
  )
fi

if [[ ! -x "${OUT}/coredns" || ! -f "${OUT}/${COREDNS_STAMP}" ]]; then
  # A module that requires only CoreDNS selects exactly the dependency versions of CoreDNS's
  # own go.mod; the default plugin set (plugin.cfg) is compiled in.
  DNS_WORK="${BUILD_DIR}/coredns-${COREDNS_VERSION}"
  mkdir -p "${DNS_WORK}"
  printf 'module local/coredns-binary\n\ngo 1.26\n\nrequire github.com/coredns/coredns v%s\n' "${COREDNS_VERSION}" >"${DNS_WORK}/go.mod"
  printf 'package main\n' >"${DNS_WORK}/doc.go"
  log "building coredns v${COREDNS_VERSION} from the Go module proxy (first time only, a few minutes)"
  started="${SECONDS}"
  (
    cd "${DNS_WORK}"
    go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=v${COREDNS_VERSION}" \
      -o "${OUT}/coredns.tmp" github.com/coredns/coredns
  )
  mv "${OUT}/coredns.tmp" "${OUT}/coredns"
  rm -f "${OUT}"/coredns-v*.built
  touch "${OUT}/${COREDNS_STAMP}"
  log "coredns v${COREDNS_VERSION} built in $((SECONDS - started))s"
fi

binary_cache_ready
log "binaries ready in ${OUT}"
echo "${OUT}"
