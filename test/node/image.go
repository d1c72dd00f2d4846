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
	v1 "github.com/google/go-containerregistry/pkg/v1"
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
	return writeImage(tarPath, spec.Ref, []v1.Layer{layer}, v1.Config{
		Entrypoint: []string{entry},
		Cmd:        spec.Args,
		User:       fmt.Sprintf("%d:%d", spec.UID, spec.UID),
		WorkingDir: "/",
		Env:        []string{"PATH=/"},
	})
}

// LayeredImage describes an image of several layers, as WriteLayeredImage writes it.
type LayeredImage struct {
	// Ref is the name recorded in the tarball (see ImageSpec.Ref).
	Ref string
	// Layers are uncompressed layer tarballs, bottom first (WritePackageLayer,
	// WriteFilesLayer).
	Layers     []string
	Entrypoint []string
	Cmd        []string
	Env        []string
	// User is "uid" or "uid:gid".
	User       string
	WorkingDir string
	// Volumes are paths the runtime mounts a fresh writable folder on, as VOLUME does.
	Volumes []string
}

// WriteLayeredImage writes spec as a docker-archive tarball that `ctr images import` loads.
// The layers stay uncompressed: containerd takes them as they are, and compressing a few
// hundred megabytes only to unpack them again would cost most of the build.
func WriteLayeredImage(tarPath string, spec LayeredImage) error {
	var layers []v1.Layer
	for _, p := range spec.Layers {
		// Stored compressed: an image pushed to a registry goes as gzip, and a layer kept
		// uncompressed would be compressed again on every push.
		l, err := tarball.LayerFromFile(p)
		if err != nil {
			return err
		}
		layers = append(layers, l)
	}
	c := v1.Config{Entrypoint: spec.Entrypoint, Cmd: spec.Cmd, Env: spec.Env, User: spec.User, WorkingDir: spec.WorkingDir}
	if len(spec.Volumes) > 0 {
		c.Volumes = map[string]struct{}{}
		for _, v := range spec.Volumes {
			c.Volumes[v] = struct{}{}
		}
	}
	return writeImage(tarPath, spec.Ref, layers, c)
}

// writeImage writes layers with config c, for linux/amd64, as a docker-archive tarball.
func writeImage(tarPath, ref string, layers []v1.Layer, c v1.Config) error {
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.DockerManifestSchema2), layers...)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config = c
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(tarPath, r, img)
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
