#!/usr/bin/env bash
# Prints a directory holding the Argo CD binary and CRDs the local fleet (test/fleet) runs and
# installs. Order: $ARGOCD_BINARIES_DIR if set; else the shared cache (hack/lib/binary-cache.sh) or bin/argocd/; else build from
# the Go module proxy and cache the result. Progress goes to stderr, the directory alone to stdout.
#
#   argocd                             one binary for every component; it picks the component by
#                                      the name it is invoked as (or $ARGOCD_BINARY_NAME)
#   argocd-application-controller      symlinks to argocd, so a plain exec runs that component
#   argocd-repo-server
#   argocd-applicationset-controller
#   argocd-server
#   crds/                              Application, AppProject and ApplicationSet CRDs, and
#   install.yaml                       Argo CD's install manifest, both taken from manifests/ of
#                                      the same module version. The fleet reads from the manifest
#                                      which ConfigMap keys feed which environment variables.
#   git-verify-wrapper.sh              helper scripts the repo-server runs from $PATH (the image
#   gpg-wrapper.sh                     copies them to /usr/local/bin), from hack/ of the module
#
# Argo CD v3.6 declares `go 1.27.0`; the go command fetches that toolchain from the module proxy
# (ARGOCD_GOTOOLCHAIN). Older v3 releases (v3.4, v3.5) do not resolve from the proxy alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARGOCD_VERSION="${ARGOCD_VERSION:-3.6.1}"
ARGOCD_GOTOOLCHAIN="${ARGOCD_GOTOOLCHAIN:-go1.27.4}"
GOOS_GOARCH="$(go env GOOS)-$(go env GOARCH)"
LINKS=(argocd-application-controller argocd-repo-server argocd-applicationset-controller argocd-server)
# The links come last, so a complete set means the binary and the CRDs are in place.
BINARIES=(argocd "${LINKS[@]}")
MODULE=github.com/argoproj/argo-cd/v3

log() { echo "argocd-binaries: $*" >&2; }

# shellcheck source=lib/binary-cache.sh
source "${ROOT}/hack/lib/binary-cache.sh"
binary_cache_at "argocd/${ARGOCD_VERSION}-${GOOS_GOARCH}"
binary_cache_enter "${ARGOCD_BINARIES_DIR:-}"

# A cache made when fewer components had links: the binary is there, and the files written
# before it, so the links alone complete it.
if [[ -x "${OUT}/argocd" ]]; then
  for l in "${LINKS[@]}"; do ln -sfn argocd "${OUT}/${l}"; done
  if binary_cache_ready; then
    log "binaries ready in ${OUT} (links added)"
    echo "${OUT}"
    exit 0
  fi
fi

WORK="${BUILD_DIR}/argocd-${ARGOCD_VERSION}"
mkdir -p "${WORK}"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0
export GOTOOLCHAIN="${ARGOCD_GOTOOLCHAIN}"

cd "${WORK}"
start=${SECONDS}
log "fetching ${MODULE}@v${ARGOCD_VERSION} and toolchain ${GOTOOLCHAIN} (first time only)"
if ! download="$(go mod download -json "${MODULE}@v${ARGOCD_VERSION}")"; then
  log "go mod download ${MODULE}@v${ARGOCD_VERSION} failed: ${download}"
  exit 1
fi
field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" <<<"${download}"; }
MODFILE="$(field GoMod)"
SRC="$(field Dir)"
if [[ -z "${MODFILE}" || -z "${SRC}" ]]; then
  log "go mod download gave no module files: ${download}"
  exit 1
fi

# Argo CD's go.mod pins k8s.io and a few others with replace directives, which the go command
# ignores in a dependency. A wrapper module copies them; the one local-path replace
# (gitops-engine => ./gitops-engine, a nested module left out of the module zip) becomes a
# require of the same version, which upstream tags at every release.
{
  printf 'module local/argocd-binaries\n\ngo 1.27.0\n\n'
  printf 'require (\n\t%s v%s\n\t%s v%s\n)\n\n' "${MODULE}" "${ARGOCD_VERSION}" \
    github.com/argoproj/argo-cd/gitops-engine/v3 "${ARGOCD_VERSION}"
  awk '
    /^replace \($/ { inblock = 1; print; next }
    inblock && /^\)$/ { inblock = 0; print; next }
    inblock { if ($0 !~ /=> \.\.?\//) print; next }
    /^replace / && $0 !~ /=> \.\.?\// { print }
  ' "${MODFILE}"
} >go.mod.new
mv go.mod.new go.mod
printf 'package main\n' >doc.go
rm -f go.sum

mkdir -p "${OUT}/crds"
for f in crds/application-crd.yaml crds/appproject-crd.yaml crds/applicationset-crd.yaml install.yaml; do
  cat "${SRC}/manifests/${f}" >"${OUT}/${f}.tmp"
  mv "${OUT}/${f}.tmp" "${OUT}/${f}"
done
for f in git-verify-wrapper.sh gpg-wrapper.sh; do
  cat "${SRC}/hack/${f}" >"${OUT}/${f}.tmp"
  chmod 0755 "${OUT}/${f}.tmp"
  mv "${OUT}/${f}.tmp" "${OUT}/${f}"
done

# The variables Argo CD's own Makefile sets on github.com/argoproj/argo-cd/v3/common. The module
# proxy does not say which commit a version is, so gitCommit carries the tag (as the OCM script
# does); with a commit, a tag and a clean tree Argo CD reports the plain release version.
KUBECTL_VERSION="$(go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/client-go)"
PKG="${MODULE}/common"
LDFLAGS="-s -w -X ${PKG}.version=${ARGOCD_VERSION} -X ${PKG}.buildDate=1970-01-01T00:00:00Z"
LDFLAGS+=" -X ${PKG}.gitCommit=v${ARGOCD_VERSION} -X ${PKG}.gitTag=v${ARGOCD_VERSION} -X ${PKG}.gitTreeState=clean"
LDFLAGS+=" -X ${PKG}.kubectlVersion=${KUBECTL_VERSION}"

log "go build ${MODULE}/cmd v${ARGOCD_VERSION} with ${GOTOOLCHAIN} (first time only; ~8 CPU-minutes)"
go build -trimpath -ldflags "${LDFLAGS}" -o "${OUT}/argocd.tmp" "${MODULE}/cmd"
mv "${OUT}/argocd.tmp" "${OUT}/argocd"
for l in "${LINKS[@]}"; do ln -sfn argocd "${OUT}/${l}"; done
log "built argocd in $((SECONDS - start))s"

binary_cache_ready
log "binaries ready in ${OUT}"
echo "${OUT}"
