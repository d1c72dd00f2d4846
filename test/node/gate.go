package node

import (
	"os"
	"testing"
)

// RequestedEnv is the environment variable that asks for the tests on real nodes: they change
// the machine (cgroups, network namespaces, mounts) while they run, so they are opt-in.
const RequestedEnv = "FLEET_REAL_NODES"

// Requested reports whether the tests on real nodes were asked for, and, when they were, why
// they cannot run here (nil when they can).
func Requested() (bool, error) {
	if os.Getenv(RequestedEnv) != "1" {
		return false, nil
	}
	return true, Available()
}

// SkipReason says how to ask for the tests on real nodes.
const SkipReason = "real-node test: set " + RequestedEnv + "=1 (make test-node) to run it, as root with hack/node-packages.sh's packages"

// RequireForTest skips t unless real nodes were asked for (or with -short), and fails it when
// they were asked for and cannot run here: a skip would report a pass that tested nothing.
func RequireForTest(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real nodes; skipped with -short")
	}
	requested, err := Requested()
	if !requested {
		t.Skip(SkipReason)
	}
	if err != nil {
		t.Fatalf("%s=1 but real nodes cannot run here: %v", RequestedEnv, err)
	}
}
