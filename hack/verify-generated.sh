#!/usr/bin/env bash
# Regenerates every generated file and fails if any of them changed: generated code, CRDs
# and rendered manifests must always match their sources.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

GENERATED=(apis manifests charts/argocd-agent-addon/crds pkg/spoke/upstream)
snapshot() {
  local p
  for p in "${GENERATED[@]}"; do
    [[ -e "$p" ]] && find "$p" -type f \( -name 'zz_generated*.go' -o -name '*.yaml' -o -name '*.json' -o -name SOURCE \) -print0
  done | sort -z | xargs -0 -r sha256sum
}
before="$(snapshot)"
make --no-print-directory generate manifests >/dev/null
after="$(snapshot)"
if [[ "${before}" != "${after}" ]]; then
  echo "Generated files were stale and have been regenerated; commit these changes:" >&2
  diff <(echo "${before}") <(echo "${after}") | sed -n 's/^[<>] [0-9a-f]*  /  /p' | sort -u >&2
  exit 1
fi
echo "generated files are up to date"
