#!/usr/bin/env bash
# Prints a directory holding the Open Cluster Management binaries the local fleet (test/fleet)
# runs as plain processes. Order: $OCM_BINARIES_DIR if set; else the shared cache (hack/lib/binary-cache.sh) or bin/ocm/; else
# build them from the Go module proxy and cache the result. Progress goes to stderr, the
# directory alone to stdout.
#
#   registration            hub `controller` (cluster registration, CSR approval, cluster sets)
#   placement               hub `controller` (Placement -> PlacementDecision)
#   addon                   hub `manager` (ClusterManagementAddOn/AddOnTemplate -> ManifestWorks,
#                           addon CSR approval and signing); also `webhook-server` (v1beta1 conversion)
#   registration-operator   spoke `agent`: registration and work agents in one process (OCM's
#                           "singleton" klusterlet). One process per managed cluster instead of two,
#                           and it starts the work agent only once the hub kubeconfig exists.
#
# Not built: work (hub `manager` only runs ManifestWorkReplicaSets and TTL garbage collection;
# the spoke work agent is inside registration-operator `agent`). Add it to OCM_BINARIES_LIST
# when needed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OCM_VERSION="${OCM_VERSION:-1.2.1}"
GOOS_GOARCH="$(go env GOOS)-$(go env GOARCH)"
read -r -a BINARIES <<<"${OCM_BINARIES_LIST:-registration placement addon registration-operator}"
# OCM's own manifests (RBAC templates the operator renders), copied from the same module so that
# the local fleet runs every component with the identity and rights OCM gives it.
CACHE_FILES=(manifests/.complete)

log() { echo "ocm-binaries: $*" >&2; }

# shellcheck source=lib/binary-cache.sh
source "${ROOT}/hack/lib/binary-cache.sh"
binary_cache_at "ocm/${OCM_VERSION}-${GOOS_GOARCH}"
binary_cache_enter "${OCM_BINARIES_DIR:-}"

WORK="${BUILD_DIR}/ocm-${OCM_VERSION}"
mkdir -p "${WORK}"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0
# One dependency (sigs.k8s.io/about-api) is not in the public checksum database.
export GONOSUMDB="${GONOSUMDB:+${GONOSUMDB},}sigs.k8s.io/about-api"

# A wrapper module: ocm has no replace directives, so requiring it alone reproduces its own
# dependency versions (api, addon-framework and sdk-go v1.2.0, k8s.io v0.34). These binaries run
# as separate processes, so they do not clash with the project's api v1.3.0.
printf 'module local/ocm-binaries\n\ngo 1.26\n\nrequire open-cluster-management.io/ocm v%s\n' "${OCM_VERSION}" >"${WORK}/go.mod.new"
mv "${WORK}/go.mod.new" "${WORK}/go.mod"
printf 'package main\n' >"${WORK}/doc.go"
rm -f "${WORK}/go.sum"

MAJOR="${OCM_VERSION%%.*}"
MINOR="${OCM_VERSION#*.}"; MINOR="${MINOR%%.*}"
LDFLAGS="-s -w"
# The same variables OCM's own Makefile (openshift/build-machinery-go) sets.
for v in "versionFromGit=v${OCM_VERSION}" "majorFromGit=${MAJOR}" "minorFromGit=${MINOR}" \
  "commitFromGit=v${OCM_VERSION}" "buildDate=1970-01-01T00:00:00Z"; do
  LDFLAGS+=" -X open-cluster-management.io/ocm/pkg/version.${v}"
done

(
  cd "${WORK}"
  for b in "${BINARIES[@]}"; do
    [[ -x "${OUT}/${b}" ]] && continue
    log "go build open-cluster-management.io/ocm/cmd/${b} v${OCM_VERSION} (first time only)"
    start=${SECONDS}
    go build -trimpath -ldflags "${LDFLAGS}" -o "${OUT}/${b}.tmp" "open-cluster-management.io/ocm/cmd/${b}"
    mv "${OUT}/${b}.tmp" "${OUT}/${b}"
    log "built ${b} in $((SECONDS - start))s"
  done
)

if [[ ! -f "${OUT}/manifests/.complete" ]]; then
  src="$(cd "${WORK}" && go list -m -f '{{.Dir}}' open-cluster-management.io/ocm)"
  rm -rf "${OUT}/manifests.tmp"
  mkdir -p "${OUT}/manifests.tmp"
  cp -R "${src}/manifests/cluster-manager" "${src}/manifests/klusterlet" "${OUT}/manifests.tmp/"
  chmod -R u+w "${OUT}/manifests.tmp"
  touch "${OUT}/manifests.tmp/.complete"
  rm -rf "${OUT}/manifests"
  mv "${OUT}/manifests.tmp" "${OUT}/manifests"
  log "copied OCM's manifests from ${src}"
fi

binary_cache_ready
log "binaries ready in ${OUT}"
echo "${OUT}"
