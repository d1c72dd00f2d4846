package testenv

import (
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
)

// TestAPIServerReportsItsVersion guards the version ldflags of hack/test-binaries.sh: clients
// parse the server's version, and an unset one ("v0.0.0-master") breaks them.
func TestAPIServerReportsItsVersion(t *testing.T) {
	env := StartForTest(t, Options{WithoutOCM: true})
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.GitVersion, "v1.36.") || v.Major != "1" || v.Minor != "36" {
		t.Errorf("server version = %+v, want v1.36.x", v)
	}
}
