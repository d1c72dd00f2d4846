// Command image builds this project's container image without a container engine, from the
// static binary `make build` makes: an OCI image layout (bin/image) and a tarball that
// `docker load`, `podman load` and `crane push` take; with --push it also pushes it to a
// registry. See the README's install section.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	var s spec
	var out, tarPath, tag, push string
	var epoch int64
	flag.StringVar(&s.Binary, "binary", "bin/argocd-agent-addon", "the static binary (make build)")
	flag.StringVar(&s.Version, "version", "v0.0.0-dev", "the version label")
	flag.StringVar(&s.Revision, "revision", "unknown", "the git commit label")
	flag.Int64Var(&epoch, "source-date-epoch", sourceDateEpoch(), "time of every file and of the image, in seconds (SOURCE_DATE_EPOCH)")
	flag.StringVar(&out, "out", "bin/image", "OCI image layout folder to write")
	flag.StringVar(&tarPath, "tar", "bin/argocd-agent-addon-image.tar", "tarball to write (docker load / podman load / crane push)")
	flag.StringVar(&tag, "tag", "argocd-agent-addon:v0.0.0-dev", "the reference recorded in the tarball")
	flag.StringVar(&push, "push", "", "also push to this reference, e.g. registry.example.com/gitops/argocd-agent-addon:v1.2.3 (credentials from the docker config)")
	flag.Parse()
	s.Created = time.Unix(epoch, 0).UTC()
	if err := run(s, out, tarPath, tag, push); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func sourceDateEpoch() int64 {
	if v, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return v
	}
	return 0
}

func run(s spec, out, tarPath, tag, push string) error {
	img, err := build(s)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
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
	if err := p.AppendImage(img); err != nil {
		return err
	}
	ref, err := name.ParseReference(tag)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
		return err
	}
	fmt.Printf("image %s (%s): OCI layout %s, tarball %s\n", ref, digest, out, tarPath)
	if push != "" {
		dst, err := name.ParseReference(push)
		if err != nil {
			return err
		}
		if err := remote.Write(dst, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing to %s: %w", dst, err)
		}
		fmt.Printf("pushed %s@%s\n", dst.Context(), digest)
	}
	return nil
}
