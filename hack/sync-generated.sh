#!/usr/bin/env bash
# Copies the generated CRDs to every place that ships them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART_CRDS="${ROOT}/charts/argocd-agent-addon/crds"
if [[ -d "${CHART_CRDS}" ]]; then
  rm -f "${CHART_CRDS}"/*.yaml
  cp "${ROOT}"/manifests/crds/*.yaml "${CHART_CRDS}/"
fi
