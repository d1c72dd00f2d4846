package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image runs as this user unless a pod says otherwise (the CMP sidecar runs as Argo CD's 999).
const (
	nonRootUID = 65532
	binaryPath = "/argocd-agent-addon"
)

// spec is what the image is built from.
type spec struct {
	// Binary is the static (CGO_ENABLED=0) build of cmd/argocd-agent-addon.
	Binary string
	// Version and Revision are recorded as OCI labels.
	Version, Revision string
	// Created is every file's and the image's time, for a reproducible digest.
	Created time.Time
}

// build makes the image: one layer holding the binary, a passwd and group naming the non-root
// user, and a world-writable /tmp; no shell, no package manager, no CA bundle (the manager
// trusts the API server's CA from its ServiceAccount, and nothing else makes TLS calls to
// public endpoints). The same inputs give the same digest.
func build(s spec) (v1.Image, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) error {
		h.ModTime, h.Uname, h.Gname = s.Created, "", ""
		h.Format = tar.FormatPAX
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootUID, nonRootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootUID)
	for _, e := range []struct {
		h    tar.Header
		body []byte
	}{
		{tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644}, []byte(passwd)},
		{tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Mode: 0o644}, []byte(group)},
		{tar.Header{Name: "home/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{tar.Header{Name: "home/nonroot/", Typeflag: tar.TypeDir, Mode: 0o700, Uid: nonRootUID, Gid: nonRootUID}, nil},
		{tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}, nil},
		{tar.Header{Name: binaryPath[1:], Typeflag: tar.TypeReg, Mode: 0o755}, bin},
	} {
		if err := add(&e.h, e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config.Entrypoint = []string{binaryPath}
	cfg.Config.Cmd = []string{"manager"}
	cfg.Config.User = fmt.Sprintf("%d:%d", nonRootUID, nonRootUID)
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/", "HOME=/home/nonroot"}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "argocd-agent-addon",
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.revision": s.Revision,
		"org.opencontainers.image.source":   "https://github.com/argocd-agent-addon/argocd-agent-addon",
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: s.Created})
}
