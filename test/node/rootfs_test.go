package node_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
)

// TestPackageLayer checks that a layer made of installed Debian packages holds the closure of
// their dependencies, resolved through a merged /usr, and is the same byte for byte each time.
func TestPackageLayer(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("needs a Debian system (dpkg-query)")
	}
	pkgs, err := node.PackageClosure([]string{"dash"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pkgs {
		names[p.Name] = true
	}
	if !names["dash"] || !names["libc6"] {
		t.Fatalf("closure of dash lacks dash or libc6: %v", names)
	}
	dir := t.TempDir()
	var layers [2][]byte
	for i := range layers {
		p := filepath.Join(dir, "layer.tar")
		if _, err := node.WritePackageLayer(p, node.PackageLayer{
			Packages: []string{"dash"},
			Files:    []node.LayerFile{{Path: "/tmp", Mode: 0o1777, Dir: true}},
		}); err != nil {
			t.Fatal(err)
		}
		if layers[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(layers[0], layers[1]) {
		t.Error("two builds of the same layer differ")
	}
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(layers[0]))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.ModTime.Unix() != 0 {
			t.Errorf("%s: uid %d, mtime %s", h.Name, h.Uid, h.ModTime)
		}
		entries[h.Name] = h
	}
	if h := entries["usr/bin/dash"]; h == nil || h.Typeflag != tar.TypeReg {
		t.Error("no regular file usr/bin/dash")
	}
	if h := entries["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v", h)
	}
	// dpkg lists /bin/sh; on a merged-/usr host that is usr/bin/sh, under a bin link.
	if fi, err := os.Lstat("/bin"); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if h := entries["bin"]; h == nil || h.Typeflag != tar.TypeSymlink {
			t.Errorf("bin is not a link: %+v", h)
		}
		if entries["usr/bin/sh"] == nil {
			t.Error("no usr/bin/sh")
		}
	}
	for name := range entries {
		if strings.HasPrefix(name, "usr/share/doc/") || strings.HasPrefix(name, "usr/share/man/") {
			t.Errorf("documentation kept: %s", name)
		}
	}
}
