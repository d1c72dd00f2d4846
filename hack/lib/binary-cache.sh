# Sourced by the scripts that build test binaries from the Go module proxy. The caller sets
# BINARIES (the names that must be in the cache folder) and, optionally, CACHE_FILES, then calls
# binary_cache_at to choose the folder (OUT) and binary_cache_enter.

# BINARY_CACHE keeps what the scripts build outside the checkout, keyed by the pinned versions,
# so a second clone or a CI run on the same machine builds nothing again:
# $ARGOCD_AGENT_ADDON_CACHE, else the user's cache folder.
BINARY_CACHE="${ARGOCD_AGENT_ADDON_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/argocd-agent-addon}"

# binary_cache_at sets OUT to the cache folder for $1 (for example k8s/1.36.3-linux-amd64): the
# checkout's own bin/$1 when complete there (where earlier versions kept it), else the shared
# one; and BUILD_DIR to where the build works.
binary_cache_at() {
  OUT="${ROOT}/bin/$1"
  BUILD_DIR="${BINARY_CACHE}/.build"
  if binary_cache_ready; then return 0; fi
  OUT="${BINARY_CACHE}/$1"
}

# binary_cache_ready succeeds when every binary is in the cache.
binary_cache_ready() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "${OUT}/${b}" ]] || return 1; done
  # CACHE_FILES (optional) are other files the cache must hold.
  for b in ${CACHE_FILES[@]+"${CACHE_FILES[@]}"}; do [[ -f "${OUT}/${b}" ]] || return 1; done
}

# binary_cache_enter prints a folder and exits when $1 (an override folder) is set or the cache
# is complete. Otherwise it takes the cache's build lock, so that test packages asking at the
# same time build once, and returns to let the caller build.
binary_cache_enter() {
  if [[ -n "${1:-}" ]]; then
    echo "$1"
    exit 0
  fi
  if binary_cache_ready; then
    echo "${OUT}"
    exit 0
  fi
  mkdir -p "${OUT}"
  exec 9>"${OUT}.lock"
  flock 9
  if binary_cache_ready; then
    echo "${OUT}"
    exit 0
  fi
}
