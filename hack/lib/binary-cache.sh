# Sourced by the scripts that build test binaries from the Go module proxy. The caller sets
# OUT (the cache folder), BINARIES (the names that must be in it) and, optionally, CACHE_FILES.

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
