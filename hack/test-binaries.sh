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
binary_cache_at "k8s/${K8S_VERSION}-${GOOS_GOARCH}"
binary_cache_enter "${KUBEBUILDER_ASSETS:-}"

WORK="${BUILD_DIR}/k8s-${K8S_VERSION}"
mkdir -p "${WORK}"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

if [[ ! -x "${OUT}/kube-apiserver" || ! -x "${OUT}/kube-controller-manager" ]]; then
  log "building kube-apiserver and kube-controller-manager v${K8S_VERSION} from the Go module proxy (first time only, several minutes)"
  STAGING_VERSION="v0.${K8S_VERSION#1.}"
  {
    echo "module local/k8s-binaries"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    echo
    echo "replace ("
    # Every staging module k8s.io/kubernetes replaces with a local path is taken from the proxy
    # at its published version instead.
    go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" >"${WORK}/download.json"
    GOMOD="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' "${WORK}/download.json")"
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "${GOMOD}" | awk '{print $1}' | while read -r mod; do
      [[ "${mod}" == "k8s.io/sample-cli-plugin" ]] && continue
      echo "	${mod} => ${mod} ${STAGING_VERSION}"
    done
    echo ")"
  } >"${WORK}/go.mod.new"
  mv "${WORK}/go.mod.new" "${WORK}/go.mod"
  printf 'package main\n' >"${WORK}/doc.go"
  rm -f "${WORK}/go.sum"
  MAJOR="${K8S_VERSION%%.*}"
  MINOR="${K8S_VERSION#*.}"; MINOR="${MINOR%%.*}"
  LDFLAGS="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LDFLAGS+=" -X ${pkg}.gitVersion=v${K8S_VERSION}"
    LDFLAGS+=" -X ${pkg}.gitMajor=${MAJOR}"
    LDFLAGS+=" -X ${pkg}.gitMinor=${MINOR}"
    LDFLAGS+=" -X ${pkg}.gitTreeState=clean"
    LDFLAGS+=" -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  done
  (
    cd "${WORK}"
    for b in kube-apiserver kube-controller-manager; do
      log "go build k8s.io/kubernetes/cmd/${b}"
      go build -trimpath -ldflags "${LDFLAGS}" -o "${OUT}/${b}.tmp" "k8s.io/kubernetes/cmd/${b}"
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
