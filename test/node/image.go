package node

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PauseImage is the sandbox image every node's containerd is configured with; ImportImage
// loads it from PauseImageTarball.
const PauseImage = "localhost/pause:local"

// ImageSpec describes a one-binary image, as the project's own image is (hack/image).
type ImageSpec struct {
	// Ref is the name recorded in the tarball, as containerd will list it. A name without a
	// registry is normalised to docker.io/library/..., so local images use localhost/.
	Ref string
	// Binary is a static executable, placed at /<its base name> and run as the entrypoint.
	Binary string
	// Args are the image's default arguments (Cmd).
	Args []string
	// UID is the user the image runs as; not 0, so that runAsNonRoot pods may use it.
	UID int
}

// WriteImage writes spec as a docker-archive tarball that `ctr images import` loads. The
// files' times are fixed, so the same binary gives the same image.
func WriteImage(tarPath string, spec ImageSpec) error {
	bin, err := os.ReadFile(spec.Binary)
	if err != nil {
		return err
	}
	entry := "/" + filepath.Base(spec.Binary)
	passwd := fmt.Sprintf("root:x:0:0:root:/:/sbin/nologin\nuser:x:%d:%d:user:/:/sbin/nologin\n", spec.UID, spec.UID)
	group := fmt.Sprintf("root:x:0:\nuser:x:%d:\n", spec.UID)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		body []byte
	}{
		{"etc/", 0o755, nil},
		{"etc/passwd", 0o644, []byte(passwd)},
		{"etc/group", 0o644, []byte(group)},
		{"tmp/", 0o1777, nil},
		{entry[1:], 0o755, bin},
	} {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.DockerManifestSchema2), layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.Entrypoint = []string{entry}
	cfg.Config.Cmd = spec.Args
	cfg.Config.User = fmt.Sprintf("%d:%d", spec.UID, spec.UID)
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(spec.Ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(tarPath, ref, img)
}

// BuildStatic builds a main package of this module (for example ./test/node/images/pause,
// relative to the module root) as a static binary at out.
func BuildStatic(moduleRoot, pkg, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// BuildPauseImage builds the pause image from this package's images/pause into dir and
// returns the tarball's path.
func BuildPauseImage(moduleRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "pause")
	if err := BuildStatic(moduleRoot, "./test/node/images/pause", bin); err != nil {
		return "", err
	}
	tarPath := filepath.Join(dir, "pause.tar")
	// 65535 is the user upstream's pause image runs as.
	return tarPath, WriteImage(tarPath, ImageSpec{Ref: PauseImage, Binary: bin, UID: 65535})
}
