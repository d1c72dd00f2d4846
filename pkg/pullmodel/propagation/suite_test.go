package propagation_test

import (
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
)

// s is the package's API server, manager and work agent, shared by its envtest tests; nil with
// -short, which runs the unit tests alone.
var s *pulltest.Suite

func TestMain(m *testing.M) { pulltest.Main(m, &s) }
