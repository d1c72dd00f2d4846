// Command release checks and packages a release of this project for `make release`:
//
//	release check   --version vX.Y.Z --image REF   refuses a malformed version, a tree with
//	                                                uncommitted changes, an image tag that is not
//	                                                the version, and a CHANGELOG without the
//	                                                version's section
//	release package --version vX.Y.Z --image REF --out DIR
//	                                                writes the chart, versioned X.Y.Z with
//	                                                appVersion vX.Y.Z and the image's repository
//	                                                as its default, and the version's release
//	                                                notes from the CHANGELOG
//
// The image index itself is `make image`'s (hack/image). See docs/install.md, "Releases".
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// versionPattern is a release version: v, then semantic version 2.0 without build metadata
// (Helm and OCI tags would turn a "+" into something else).
var versionPattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "check" && os.Args[1] != "package") {
		fmt.Fprintln(os.Stderr, "usage: release check|package --version vX.Y.Z --image REF [--out DIR]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	r := release{}
	fs.StringVar(&r.Version, "version", "", "the release version, vX.Y.Z")
	fs.StringVar(&r.Image, "image", "", "the image reference, tagged with the version")
	fs.StringVar(&r.Root, "root", ".", "the project's checkout")
	out := fs.String("out", "", "package: the folder to write the chart and notes to")
	_ = fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "check":
		err = r.check()
	case "package":
		err = r.pack(*out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// release is one version of the project being released from a checkout.
type release struct {
	Version, Image, Root string
}

// check refuses what must not be released.
func (r release) check() error {
	if !versionPattern.MatchString(r.Version) {
		return fmt.Errorf("VERSION %q is not a release version: want vMAJOR.MINOR.PATCH, e.g. v0.1.0 or v0.2.0-rc.1", r.Version)
	}
	ref, err := name.NewTag(r.Image)
	if err != nil {
		return fmt.Errorf("IMAGE %q: %w", r.Image, err)
	}
	// The packaged chart's default image is this one: without a registry it would name Docker
	// Hub's library namespace, where no release is pushed.
	if _, err := name.NewTag(r.Image, name.StrictValidation); err != nil {
		return fmt.Errorf("IMAGE %s names no registry: a release is pushed where clusters pull it (IMAGE=registry.example.com/gitops/argocd-agent-addon:%s)", r.Image, r.Version)
	}
	if ref.TagStr() != r.Version {
		return fmt.Errorf("IMAGE %s is tagged %q, not the version %s: leave the tag to the release (IMAGE=%s:%s)", r.Image, ref.TagStr(), r.Version, ref.Context(), r.Version)
	}
	status, err := git(r.Root, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return err
	}
	if strings.TrimSpace(status) != "" {
		return fmt.Errorf("the tree has uncommitted changes; a release is built from a commit only:\n%s", status)
	}
	if _, err := r.notes(); err != nil {
		return err
	}
	return nil
}

// git runs git in dir and returns its output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// notes returns the CHANGELOG's section of the version ("## vX.Y.Z", up to the next "## ").
func (r release) notes() (string, error) {
	b, err := os.ReadFile(filepath.Join(r.Root, "CHANGELOG.md"))
	if err != nil {
		return "", err
	}
	var section []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			head := strings.Fields(strings.TrimPrefix(line, "## "))
			in = len(head) > 0 && head[0] == r.Version
		}
		if in {
			section = append(section, line)
		}
	}
	text := strings.TrimSpace(strings.Join(section, "\n"))
	if text == "" || !strings.Contains(text, "\n") {
		return "", fmt.Errorf("CHANGELOG.md has no section for %s: add \"## %s\" with the release's changes (rename \"## Unreleased\") and commit it", r.Version, r.Version)
	}
	return text + "\n", nil
}

// pack writes the versioned chart and the release notes into out.
func (r release) pack(out string) error {
	if err := r.check(); err != nil {
		return err
	}
	if out == "" {
		return errors.New("--out is empty")
	}
	ch, err := loader.Load(filepath.Join(r.Root, "charts", "argocd-agent-addon"))
	if err != nil {
		return err
	}
	ref, _ := name.NewTag(r.Image)
	ch.Metadata.Version = strings.TrimPrefix(r.Version, "v")
	ch.Metadata.AppVersion = r.Version
	// image.tag stays empty, so the image is the appVersion's: the chart and the image index
	// of one release cannot name two versions.
	repo := ref.Context().String()
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		const line = "\n  repository: argocd-agent-addon\n"
		if !bytes.Contains(f.Data, []byte(line)) {
			return fmt.Errorf("the chart's values.yaml no longer has %q to point at %s", strings.TrimSpace(line), repo)
		}
		f.Data = bytes.Replace(f.Data, []byte(line), []byte("\n  repository: "+repo+"\n"), 1)
	}
	if img, ok := ch.Values["image"].(map[string]any); ok {
		img["repository"] = repo
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	path, err := chartutil.Save(ch, out)
	if err != nil {
		return err
	}
	notes, err := r.notes()
	if err != nil {
		return err
	}
	notesPath := filepath.Join(out, "RELEASE-NOTES.md")
	if err := os.WriteFile(notesPath, []byte(notes), 0o644); err != nil {
		return err
	}
	fmt.Printf("release %s: chart %s (version %s, appVersion %s, image %s:%s), notes %s\n",
		r.Version, path, ch.Metadata.Version, ch.Metadata.AppVersion, repo, r.Version, notesPath)
	return nil
}
