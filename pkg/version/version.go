// Package version carries the build's version, stamped at link time.
package version

import (
	"fmt"
	"runtime"
)

// Set with -ldflags "-X github.com/argocd-agent-addon/argocd-agent-addon/pkg/version.Version=...".
var (
	Version   = "v0.0.0-dev"
	GitCommit = "unknown"
)

// String is the one-line version report printed by the version subcommand.
func String() string {
	return fmt.Sprintf("argocd-agent-addon %s (commit %s, %s, %s/%s)", Version, GitCommit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
