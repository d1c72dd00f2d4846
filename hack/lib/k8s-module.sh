# Sourced by the scripts that build Kubernetes binaries from the Go module proxy
# (hack/test-binaries.sh, hack/node-binaries.sh), so every binary comes from the same module
# setup and reports the same version.

# k8s_module_setup writes into $1 (a build folder) a module that requires k8s.io/kubernetes
# v$2 and sets K8S_LDFLAGS to the flags that make the binaries report v$2. Build there with
# GOFLAGS=-mod=mod and CGO_ENABLED=0.
k8s_module_setup() {
  local work="$1" version="$2" staging gomod mod major minor pkg
  staging="v0.${version#1.}"
  {
    echo "module local/k8s-binaries"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v${version}"
    echo
    echo "replace ("
    # Every staging module k8s.io/kubernetes replaces with a local path is taken from the proxy
    # at its published version instead.
    go mod download -json "k8s.io/kubernetes@v${version}" >"${work}/download.json"
    gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' "${work}/download.json")"
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "${gomod}" | awk '{print $1}' | while read -r mod; do
      [[ "${mod}" == "k8s.io/sample-cli-plugin" ]] && continue
      echo "	${mod} => ${mod} ${staging}"
    done
    echo ")"
  } >"${work}/go.mod.new"
  mv "${work}/go.mod.new" "${work}/go.mod"
  printf 'package main\n' >"${work}/doc.go"
  rm -f "${work}/go.sum"
  major="${version%%.*}"
  minor="${version#*.}"; minor="${minor%%.*}"
  K8S_LDFLAGS="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    K8S_LDFLAGS+=" -X ${pkg}.gitVersion=v${version}"
    K8S_LDFLAGS+=" -X ${pkg}.gitMajor=${major}"
    K8S_LDFLAGS+=" -X ${pkg}.gitMinor=${minor}"
    K8S_LDFLAGS+=" -X ${pkg}.gitTreeState=clean"
    K8S_LDFLAGS+=" -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  done
}
