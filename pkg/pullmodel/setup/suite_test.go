package setup_test

import (
	"os"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
)

// logs holds what the tests' managers log. Each test starts its own API server (one without
// Argo CD, one it restarts under the manager), so the package shares none.
var logs *pulltest.LogBuffer

func TestMain(m *testing.M) {
	logs = pulltest.CaptureLogs()
	os.Exit(m.Run())
}
