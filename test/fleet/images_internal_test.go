package fleet

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// TestContainerdName: AddImageAs tags an imported image by the name containerd gave it, which
// for Docker Hub differs from go-containerregistry's.
func TestContainerdName(t *testing.T) {
	for in, want := range map[string]string{
		"localhost/argocd:fleet":       "localhost/argocd:fleet",
		"redis:7":                      "docker.io/library/redis:7",
		"argoproj/argocd:v3.4.3":       "docker.io/argoproj/argocd:v3.4.3",
		"quay.io/argoproj/argocd:v3":   "quay.io/argoproj/argocd:v3",
		"10.251.1.1:34649/e2e/hello:1": "10.251.1.1:34649/e2e/hello:1",
	} {
		tag, err := name.NewTag(in, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if got := containerdName(tag); got != want {
			t.Errorf("containerdName(%s) = %s, want %s", in, got, want)
		}
	}
}
