package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	// caBundlePath is where Go's crypto/x509 (and distroless's base) looks first on Linux.
	caBundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// elfMachines are the platforms the image is built for, with the ELF machine their binary has.
var elfMachines = map[string]elf.Machine{
	"linux/amd64": elf.EM_X86_64,
	"linux/arm64": elf.EM_AARCH64,
}

// platformBinary is one platform of the image and the static binary built for it.
type platformBinary struct {
	Platform v1.Platform
	Binary   string
}

// spec is what the image is built from.
type spec struct {
	// Binaries are the static (CGO_ENABLED=0) builds of cmd/argocd-agent-addon, one a platform.
	Binaries []platformBinary
	// CABundle is the PEM bundle put at /etc/ssl/certs/ca-certificates.crt.
	CABundle []byte
	// Version and Revision are recorded as OCI labels.
	Version, Revision string
	// Created is every file's and the image's time, for a reproducible digest.
	Created time.Time
}

// parsePlatform reads "os/arch" for a platform the image supports.
func parsePlatform(s string) (v1.Platform, error) {
	if _, ok := elfMachines[s]; !ok {
		known := make([]string, 0, len(elfMachines))
		for p := range elfMachines {
			known = append(known, p)
		}
		sort.Strings(known)
		return v1.Platform{}, fmt.Errorf("platform %q: want one of %s", s, strings.Join(known, ", "))
	}
	goos, goarch, _ := strings.Cut(s, "/")
	return v1.Platform{OS: goos, Architecture: goarch}, nil
}

// platformOf names the platform a binary was built for, from its ELF header.
func platformOf(path string) (v1.Platform, error) {
	f, err := elf.Open(path)
	if err != nil {
		return v1.Platform{}, fmt.Errorf("%s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	for p, m := range elfMachines {
		if f.Machine == m {
			return parsePlatform(p)
		}
	}
	return v1.Platform{}, fmt.Errorf("%s: ELF machine %s is not a platform the image supports", path, f.Machine)
}

// checkBinary refuses a binary that would not start on p: another ELF machine, not 64-bit, not
// Linux's ABI, or dynamically linked (the image has no C library).
func checkBinary(path string, p v1.Platform) error {
	want, ok := elfMachines[p.OS+"/"+p.Architecture]
	if !ok {
		return fmt.Errorf("platform %s/%s is not supported", p.OS, p.Architecture)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF binary for %s/%s: %w", path, p.OS, p.Architecture, err)
	}
	defer func() { _ = f.Close() }()
	if f.Machine != want || f.Class != elf.ELFCLASS64 {
		return fmt.Errorf("%s is built for ELF machine %s (%s), not %s/%s (%s): cross-compile it with CGO_ENABLED=0 GOOS=%s GOARCH=%s",
			path, f.Machine, f.Class, p.OS, p.Architecture, want, p.OS, p.Architecture)
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("%s is built for OS ABI %s, not Linux", path, f.OSABI)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// caBundleSources are read in order: the machine's bundle, else the certificates Debian's
// ca-certificates package installs (what update-ca-certificates concatenates into the bundle).
var caBundleSources = []string{caBundlePath, "/usr/share/ca-certificates/mozilla"}

// loadCABundle reads the CA bundle from path, or from the first of caBundleSources that
// exists when path is empty, and checks that it holds certificates.
func loadCABundle(path string) ([]byte, error) {
	sources := caBundleSources
	if path != "" {
		sources = []string{path}
	}
	for _, src := range sources {
		st, err := os.Stat(src)
		if errors.Is(err, os.ErrNotExist) && path == "" {
			continue
		}
		if err != nil {
			return nil, err
		}
		var bundle []byte
		if st.IsDir() {
			files, err := filepath.Glob(filepath.Join(src, "*.crt"))
			if err != nil {
				return nil, err
			}
			sort.Strings(files)
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					return nil, err
				}
				bundle = append(bundle, bytes.TrimSpace(b)...)
				bundle = append(bundle, '\n')
			}
		} else if bundle, err = os.ReadFile(src); err != nil {
			return nil, err
		}
		if n := countCertificates(bundle); n == 0 {
			return nil, fmt.Errorf("%s holds no PEM certificate", src)
		}
		return bundle, nil
	}
	return nil, fmt.Errorf("no CA bundle: none of %s exists; install Debian's ca-certificates package (apt-get install ca-certificates) or pass --ca-bundle", strings.Join(caBundleSources, ", "))
}

// countCertificates counts the X.509 certificates that parse in a PEM bundle.
func countCertificates(bundle []byte) int {
	n := 0
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return n
		}
		if block.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(block.Bytes); err == nil {
				n++
			}
		}
	}
}

// build makes the image index: one image a platform, each checked to hold a binary for it.
func build(s spec) (v1.ImageIndex, map[string]v1.Image, error) {
	if len(s.Binaries) == 0 {
		return nil, nil, errors.New("no binary to pack")
	}
	if countCertificates(s.CABundle) == 0 {
		return nil, nil, errors.New("the CA bundle holds no certificate")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	images := map[string]v1.Image{}
	for _, pb := range s.Binaries {
		key := pb.Platform.OS + "/" + pb.Platform.Architecture
		if _, dup := images[key]; dup {
			return nil, nil, fmt.Errorf("two binaries for %s", key)
		}
		if err := checkBinary(pb.Binary, pb.Platform); err != nil {
			return nil, nil, err
		}
		img, err := buildImage(s, pb)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", key, err)
		}
		images[key] = img
		p := pb.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, images, nil
}

// buildImage makes one platform's image: one layer holding the binary, the CA bundle, a passwd
// and group naming the non-root user, and a world-writable /tmp; no shell, no package manager.
// The same inputs give the same digest.
func buildImage(s spec, pb platformBinary) (v1.Image, error) {
	bin, err := os.ReadFile(pb.Binary)
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
		{tar.Header{Name: "etc/ssl/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{tar.Header{Name: "etc/ssl/certs/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{tar.Header{Name: caBundlePath[1:], Typeflag: tar.TypeReg, Mode: 0o644}, s.CABundle},
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
	cfg.Architecture, cfg.OS, cfg.Variant = pb.Platform.Architecture, pb.Platform.OS, pb.Platform.Variant
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config.Entrypoint = []string{binaryPath}
	cfg.Config.Cmd = []string{"manager"}
	cfg.Config.User = fmt.Sprintf("%d:%d", nonRootUID, nonRootUID)
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/", "HOME=/home/nonroot", "SSL_CERT_FILE=" + caBundlePath}
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
