package version

import (
	"slices"
	"strings"
	"testing"
)

func TestDefaultIsV0100WithItsArgoCD(t *testing.T) {
	if got := Pairs()[0]; got != Default() {
		t.Errorf("the first pair %+v is not the default %+v", got, Default())
	}
	if Default() != (Pair{Agent: "v0.10.0", ArgoCD: "v3.5.0"}) {
		t.Errorf("default pair %+v, want argocd-agent v0.10.0 with Argo CD v3.5.0", Default())
	}
	if ImageTag(DefaultAgentImage) != ArgoCDAgentVersion {
		t.Errorf("default image %s is not argocd-agent %s", DefaultAgentImage, ArgoCDAgentVersion)
	}
	if got := ArgoCDVersions(); !slices.Equal(got, []string{"v3.5.0", "v3.4.3"}) {
		t.Errorf("paired Argo CD releases %v", got)
	}
}

func TestBothReleasesArePaired(t *testing.T) {
	for _, c := range []struct {
		agent, argoCD string
		known         bool
	}{
		{"v0.10.0", "v3.5.0", true},
		{"0.10.0", "v3.5.0", true}, // as the handshake reports it
		{"v0.9.0", "v3.4.3", true},
		{"0.9.0", "v3.4.3", true},
		// The handshake is exact: another patch release is another release.
		{"v0.10.1", "", false},
		{"v0.9", "", false},
		{"99.9.9-unreleased", "", false},
		{"latest", "", false},
		{"", "", false},
	} {
		p, ok := PairOf(c.agent)
		if ok != c.known || p.ArgoCD != c.argoCD {
			t.Errorf("PairOf(%q) = %+v, %v; want Argo CD %q, %v", c.agent, p, ok, c.argoCD, c.known)
		}
	}
}

func TestPairOfImage(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("0", 64)
	for _, c := range []struct {
		image, agent string
	}{
		{"quay.io/argoprojlabs/argocd-agent:v0.10.0", "v0.10.0"},
		{"mirror.example.com:5000/argoprojlabs/argocd-agent:v0.9.0", "v0.9.0"},
		{"ghcr.io/argoproj-labs/argocd-agent/argocd-agent:v0.9.0" + digest, "v0.9.0"},
		{"quay.io/argoprojlabs/argocd-agent" + digest, ""},
		{"localhost:5000/argocd-agent", ""},
		{"quay.io/argoprojlabs/argocd-agent:latest", ""},
	} {
		p, ok := PairOfImage(c.image)
		if p.Agent != c.agent || ok != (c.agent != "") {
			t.Errorf("PairOfImage(%q) = %+v, %v; want agent %q", c.image, p, ok, c.agent)
		}
	}
}

// An explicitly chosen supported release keeps its own Argo CD; anything else gets the default
// pair's, and the caller learns that the release was not known.
func TestComponentsPair(t *testing.T) {
	if p, known := ComponentsPair("registry.example.com/argocd-agent:v0.9.0"); !known || p.ArgoCD != "v3.4.3" {
		t.Errorf("v0.9.0: %+v, known %v", p, known)
	}
	if p, known := ComponentsPair(DefaultAgentImage); !known || p != Default() {
		t.Errorf("default image: %+v, known %v", p, known)
	}
	if p, known := ComponentsPair("registry.example.com/argocd-agent:my-build"); known || p != Default() {
		t.Errorf("unknown tag: %+v, known %v", p, known)
	}
}
