// Command image builds this project's container image without a container engine: an OCI
// image index with one image a platform (linux/amd64 and linux/arm64 from `make image`), each
// holding the static binary cross-compiled for it and a CA bundle. It writes an OCI image
// layout (bin/image) and, for `docker load` or `podman load` on this machine, a tarball of one
// platform's image; with --push it pushes the index to a registry. See docs/install.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// platformBinaries is the repeated --platform-binary os/arch=path flag.
type platformBinaries []platformBinary

func (p *platformBinaries) String() string { return fmt.Sprint(*p) }

func (p *platformBinaries) Set(v string) error {
	plat, path, ok := strings.Cut(v, "=")
	if !ok || path == "" {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	pl, err := parsePlatform(plat)
	if err != nil {
		return err
	}
	*p = append(*p, platformBinary{Platform: pl, Binary: path})
	return nil
}

func main() {
	var s spec
	var binaries platformBinaries
	var binary, caBundle, out, tarPath, tarPlatform, tag, push string
	var epoch int64
	flag.Var(&binaries, "platform-binary", "os/arch=path: the static binary for one platform of the image (repeat for each platform)")
	flag.StringVar(&binary, "binary", "", "a single static binary; the image has the one platform its ELF header names (instead of --platform-binary)")
	flag.StringVar(&caBundle, "ca-bundle", "", "PEM CA bundle for /etc/ssl/certs/ca-certificates.crt; empty: this machine's, else Debian's ca-certificates package's certificates")
	flag.StringVar(&s.Version, "version", "v0.0.0-dev", "the version label")
	flag.StringVar(&s.Revision, "revision", "unknown", "the git commit label")
	flag.Int64Var(&epoch, "source-date-epoch", sourceDateEpoch(), "time of every file and of the image, in seconds (SOURCE_DATE_EPOCH)")
	flag.StringVar(&out, "out", "bin/image", "OCI image layout folder to write")
	flag.StringVar(&tarPath, "tar", "bin/argocd-agent-addon-image.tar", "tarball of one platform's image to write (docker load / podman load); empty writes none")
	flag.StringVar(&tarPlatform, "tar-platform", "linux/"+runtime.GOARCH, "the platform of the tarball's image (this machine's by default; the first built when the image lacks it)")
	flag.StringVar(&tag, "tag", "argocd-agent-addon:v0.0.0-dev", "the reference recorded in the layout and the tarball")
	flag.StringVar(&push, "push", "", "also push the index to this reference, e.g. registry.example.com/gitops/argocd-agent-addon:v1.2.3 (credentials from the docker config)")
	flag.Parse()
	s.Created = time.Unix(epoch, 0).UTC()
	if err := gather(&s, binaries, binary, caBundle); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	if err := run(s, out, tarPath, tarPlatform, tag, push); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// gather fills s's binaries and CA bundle from the flags.
func gather(s *spec, binaries platformBinaries, binary, caBundle string) error {
	s.Binaries = binaries
	if binary != "" {
		if len(binaries) > 0 {
			return fmt.Errorf("give --binary or --platform-binary, not both")
		}
		p, err := platformOf(binary)
		if err != nil {
			return err
		}
		s.Binaries = platformBinaries{{Platform: p, Binary: binary}}
	}
	var err error
	s.CABundle, err = loadCABundle(caBundle)
	return err
}

func sourceDateEpoch() int64 {
	if v, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return v
	}
	return 0
}

func run(s spec, out, tarPath, tarPlatform, tag, push string) error {
	idx, images, err := build(s)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(tag)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()})); err != nil {
		return err
	}
	var platforms []string
	for _, pb := range s.Binaries {
		platforms = append(platforms, pb.Platform.OS+"/"+pb.Platform.Architecture)
	}
	fmt.Printf("image index %s (%s; %s): OCI layout %s\n", ref, digest, strings.Join(platforms, ", "), out)
	if tarPath != "" {
		img, ok := images[tarPlatform]
		if !ok {
			tarPlatform = platforms[0]
			img = images[tarPlatform]
		}
		if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
			return err
		}
		fmt.Printf("tarball %s: the %s image\n", tarPath, tarPlatform)
	}
	if push != "" {
		dst, err := name.ParseReference(push)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(dst, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing to %s: %w", dst, err)
		}
		fmt.Printf("pushed %s@%s\n", dst.Context(), digest)
	}
	return nil
}
