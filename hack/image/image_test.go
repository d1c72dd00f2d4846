package main

import (
	"archive/tar"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestImage builds the image the README's install uses, without a container engine, and
// checks what a cluster would run: the entrypoint is the binary and it runs (version), as the
// non-root user; the same inputs give the same digest; the tarball loads; and --push reaches a
// registry (a loopback one here).
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager")
	}
	dir := t.TempDir()
	bin, err := testenv.BuildManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := spec{Binary: bin, Version: "v1.2.3", Revision: "abc", Created: time.Unix(1700000000, 0).UTC()}
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	push := strings.TrimPrefix(srv.URL, "http://") + "/gitops/argocd-agent-addon:v1.2.3"
	out, tarPath := filepath.Join(dir, "layout"), filepath.Join(dir, "image.tar")
	if err := run(s, out, tarPath, "argocd-agent-addon:v1.2.3", push); err != nil {
		t.Fatal(err)
	}

	p, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("layout index: %v %v", m, err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Config.Entrypoint, " "); got != binaryPath || strings.Join(cfg.Config.Cmd, " ") != "manager" {
		t.Errorf("entrypoint %q cmd %q", got, cfg.Config.Cmd)
	}
	if cfg.Config.User != "65532:65532" || cfg.OS != "linux" || cfg.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("user %q os %q labels %v", cfg.Config.User, cfg.OS, cfg.Config.Labels)
	}

	// The binary in the layer runs: extract it as a container runtime would and ask its version.
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	extracted := filepath.Join(dir, "extracted")
	files := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		if h.Name == binaryPath[1:] {
			f, err := os.OpenFile(extracted, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	if h := files["tmp/"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("no world-writable /tmp: %+v", h)
	}
	if files["etc/passwd"] == nil {
		t.Errorf("no /etc/passwd for the non-root user")
	}
	outB, err := exec.Command(extracted, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(outB), "argocd-agent") {
		t.Errorf("the image's binary: %v %s", err, outB)
	}

	// Reproducible: the same inputs, the same digest.
	again, err := build(s)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds differ: %s, %s", d1, d2)
	}

	// The tarball loads, and the pushed image is in the registry with the same digest.
	tag, _ := name.NewTag("argocd-agent-addon:v1.2.3")
	fromTar, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatal(err)
	}
	// A tarball keeps the config and layers (its manifest is rewritten in Docker's format).
	c1, _ := img.ConfigName()
	if c, _ := fromTar.ConfigName(); c != c1 {
		t.Errorf("tarball config %s, want %s", c, c1)
	}
	ref, _ := name.ParseReference(push)
	desc, err := remote.Head(ref)
	if err != nil || desc.Digest != d1 {
		t.Errorf("pushed image: %v %v, want %s", desc, err, d1)
	}
}
