#!/usr/bin/env bash
# Prints a directory holding cert-manager's cert.manager.io CRDs (Certificate,
# CertificateRequest, Issuer, ClusterIssuer) of the github.com/cert-manager/cert-manager version
# go.mod pins. They are copied from deploy/crds/ of that module, which cert-manager generates
# with controller-gen from the same pkg/apis types this project imports (its Helm chart wraps
# the same files in templates), so the CRDs and the Go types never disagree. The ACME kinds
# (Order, Challenge) are left out: nothing here uses them. Order: $CERT_MANAGER_CRDS_DIR if set;
# else the cache under bin/cert-manager/; else copy from the module cache (downloading the
# module through the Go module proxy when missing). The directory alone goes to stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE=github.com/cert-manager/cert-manager
KINDS=(certificates certificaterequests issuers clusterissuers)

if [[ -n "${CERT_MANAGER_CRDS_DIR:-}" ]]; then
  echo "${CERT_MANAGER_CRDS_DIR}"
  exit 0
fi
VERSION="$(cd "${ROOT}" && go list -m -f '{{.Version}}' "${MODULE}")"
OUT="${ROOT}/bin/cert-manager/${VERSION}/crds"
complete() {
  local k
  for k in "${KINDS[@]}"; do [[ -s "${OUT}/cert-manager.io_${k}.yaml" ]] || return 1; done
}
if complete; then
  echo "${OUT}"
  exit 0
fi
DIR="$(cd "${ROOT}" && go mod download -json "${MODULE}@${VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "${DIR}" || ! -d "${DIR}/deploy/crds" ]]; then
  echo "cert-manager-crds: ${MODULE}@${VERSION} has no deploy/crds" >&2
  exit 1
fi
TMP="$(mktemp -d "${ROOT}/bin/.cert-manager-crds.XXXXXX")"
trap 'rm -rf "${TMP}"' EXIT
for k in "${KINDS[@]}"; do
  cp "${DIR}/deploy/crds/cert-manager.io_${k}.yaml" "${TMP}/"
done
chmod 0644 "${TMP}"/*.yaml
mkdir -p "${OUT}"
mv "${TMP}"/*.yaml "${OUT}/"
echo "cert-manager-crds: copied ${#KINDS[@]} CRDs of ${MODULE}@${VERSION} to ${OUT}" >&2
echo "${OUT}"
