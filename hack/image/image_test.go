package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// makeBinaries cross-compiles the manager for every platform of the image with the Makefile's
// own target (`make binaries`), into dir/<os>_<arch>/.
func makeBinaries(t *testing.T, dir string) map[string]string {
	t.Helper()
	cmd := exec.Command("make", "-s", "binaries", "BIN="+dir, "VERSION=v1.2.3", "GIT_COMMIT=abc")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make binaries: %v\n%s", err, out)
	}
	out := map[string]string{}
	for p := range elfMachines {
		out[p] = filepath.Join(dir, strings.ReplaceAll(p, "/", "_"), "argocd-agent-addon")
	}
	return out
}

// layerFiles reads an image's single layer: each file's header and body.
func layerFiles(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	headers, bodies := map[string]*tar.Header{}, map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return headers, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name], bodies[h.Name] = h, b
	}
}

// TestImageIndex builds the image `make image` builds, from the Makefile's cross-compiled
// binaries, and reads it back as a runtime would: an OCI index with linux/amd64 and linux/arm64,
// each image holding a binary whose ELF machine is its platform's, run as the non-root user
// through the binary's entrypoint, with a CA bundle where Go looks for it. This machine's binary
// runs (version); the same inputs give the same digest; the tarball is this machine's image and
// loads; --push puts the whole index in a registry.
func TestImageIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the manager")
	}
	dir := t.TempDir()
	bins := makeBinaries(t, dir)
	ca, err := loadCABundle("")
	if err != nil {
		t.Fatal(err)
	}
	s := spec{CABundle: ca, Version: "v1.2.3", Revision: "abc", Created: time.Unix(1700000000, 0).UTC()}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		pl, err := parsePlatform(p)
		if err != nil {
			t.Fatal(err)
		}
		s.Binaries = append(s.Binaries, platformBinary{Platform: pl, Binary: bins[p]})
	}
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	push := strings.TrimPrefix(srv.URL, "http://") + "/gitops/argocd-agent-addon:v1.2.3"
	out, tarPath := filepath.Join(dir, "layout"), filepath.Join(dir, "image.tar")
	host := "linux/" + runtime.GOARCH
	if err := run(s, out, tarPath, host, "argocd-agent-addon:v1.2.3", push); err != nil {
		t.Fatal(err)
	}

	p, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("the layout does not hold one image index: %+v %v", tm, err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s names no platform", d.Digest)
		}
		plat := d.Platform.OS + "/" + d.Platform.Architecture
		seen[plat] = true
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS+"/"+cfg.Architecture != plat {
			t.Errorf("%s: the image's config says %s/%s", plat, cfg.OS, cfg.Architecture)
		}
		if got := strings.Join(cfg.Config.Entrypoint, " "); got != binaryPath || strings.Join(cfg.Config.Cmd, " ") != "manager" {
			t.Errorf("%s: entrypoint %q cmd %q", plat, got, cfg.Config.Cmd)
		}
		if cfg.Config.User != "65532:65532" || cfg.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
			t.Errorf("%s: user %q labels %v", plat, cfg.Config.User, cfg.Config.Labels)
		}
		headers, bodies := layerFiles(t, img)
		f, err := elf.NewFile(bytes.NewReader(bodies[binaryPath[1:]]))
		if err != nil {
			t.Fatalf("%s: the entrypoint is not an ELF binary: %v", plat, err)
		}
		if f.Machine != elfMachines[plat] {
			t.Errorf("%s: the binary's ELF machine is %s, want %s", plat, f.Machine, elfMachines[plat])
		}
		if n := countCertificates(bodies[caBundlePath[1:]]); n == 0 || !bytes.Equal(bodies[caBundlePath[1:]], ca) {
			t.Errorf("%s: CA bundle at %s: %d certificates", plat, caBundlePath, n)
		}
		if h := headers["tmp/"]; h == nil || h.Mode&0o1777 != 0o1777 {
			t.Errorf("%s: no world-writable /tmp: %+v", plat, h)
		}
		if !strings.Contains(string(bodies["etc/passwd"]), ":65532:65532:") {
			t.Errorf("%s: /etc/passwd does not name the non-root user", plat)
		}
		if plat == host {
			extracted := filepath.Join(dir, "extracted")
			if err := os.WriteFile(extracted, bodies[binaryPath[1:]], 0o755); err != nil {
				t.Fatal(err)
			}
			outB, err := exec.Command(extracted, "version").CombinedOutput()
			if err != nil || !strings.Contains(string(outB), "v1.2.3") {
				t.Errorf("this machine's image: its binary: %v %s", err, outB)
			}
		}
	}
	if !seen["linux/amd64"] || !seen["linux/arm64"] || len(m.Manifests) != 2 {
		t.Errorf("platforms in the index: %v", seen)
	}

	// Reproducible: the same inputs, the same digest.
	again, _, err := build(s)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds differ: %s, %s", d1, d2)
	}

	// The tarball is this machine's image.
	tag, _ := name.NewTag("argocd-agent-addon:v1.2.3")
	fromTar, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := fromTar.ConfigFile(); err != nil || cfg.OS+"/"+cfg.Architecture != host {
		t.Errorf("tarball image: %v %v, want %s", cfg, err, host)
	}
	// The registry holds the index with the same digest, and serves each platform.
	ref, _ := name.ParseReference(push)
	desc, err := remote.Head(ref)
	if err != nil || desc.Digest != d1 {
		t.Errorf("pushed index: %v %v, want %s", desc, err, d1)
	}
	arm, err := remote.Image(ref, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := arm.ConfigFile(); err != nil || cfg.Architecture != "arm64" {
		t.Errorf("the registry's arm64 image: %v %v", cfg, err)
	}
}

// TestImageRefusesAWrongPlatformBinary: a binary of another machine, or a dynamically linked
// one, is refused before anything is packed, naming the platform and how to build it; a
// single --binary gets the platform its ELF header names, never a fixed one.
func TestImageRefusesAWrongPlatformBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles")
	}
	dir := t.TempDir()
	ca, err := loadCABundle("")
	if err != nil {
		t.Fatal(err)
	}
	// A small program stands in for the manager: only its ELF header matters here.
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	compile := func(goarch, cgo, source string) string {
		out := filepath.Join(dir, goarch+"-cgo"+cgo)
		cmd := exec.Command("go", "build", "-o", out, source)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED="+cgo, "GO111MODULE=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", goarch, err, b)
		}
		return out
	}
	amd64, arm64 := compile("amd64", "0", src), compile("arm64", "0", src)
	amdPlat, _ := parsePlatform("linux/amd64")
	armPlat, _ := parsePlatform("linux/arm64")
	s := spec{CABundle: ca, Created: time.Unix(0, 0)}

	s.Binaries = []platformBinary{{Platform: amdPlat, Binary: amd64}, {Platform: armPlat, Binary: amd64}}
	if _, _, err := build(s); err == nil || !strings.Contains(err.Error(), "not linux/arm64") || !strings.Contains(err.Error(), "GOARCH=arm64") {
		t.Errorf("an amd64 binary packed as linux/arm64: want a refusal, got %v", err)
	}
	s.Binaries = []platformBinary{{Platform: amdPlat, Binary: arm64}}
	if _, _, err := build(s); err == nil || !strings.Contains(err.Error(), "not linux/amd64") {
		t.Errorf("an arm64 binary packed as linux/amd64: want a refusal, got %v", err)
	}
	if runtime.GOOS == "linux" {
		if _, err := exec.LookPath("gcc"); err == nil {
			// The net package links the C library's resolver when cgo is on.
			cgoSrc := filepath.Join(dir, "net.go")
			if err := os.WriteFile(cgoSrc, []byte("package main\nimport \"net\"\nfunc main() { _, _ = net.LookupHost(\"x\") }\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			dynamic := compile(runtime.GOARCH, "1", cgoSrc)
			host, _ := parsePlatform("linux/" + runtime.GOARCH)
			s.Binaries = []platformBinary{{Platform: host, Binary: dynamic}}
			if _, _, err := build(s); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
				t.Errorf("a dynamically linked binary: want a refusal, got %v", err)
			}
		}
	}
	for bin, want := range map[string]string{amd64: "amd64", arm64: "arm64"} {
		p, err := platformOf(bin)
		if err != nil || p.Architecture != want {
			t.Errorf("--binary %s: platform %v %v, want linux/%s", bin, p, err, want)
		}
	}
	if _, err := loadCABundle(filepath.Join(dir, "main.go")); err == nil {
		t.Error("a CA bundle without certificates was accepted")
	}
}
