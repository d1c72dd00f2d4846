// Package nodeapps holds what the end-to-end tests on real nodes (test/e2e) and the demo
// (test/demo) both run on a fleet with real nodes (test/fleet's Options.RealNodes): the images
// built on this machine and their names in the fleet's registry, the chart's values for them,
// the guestbook that the Argo CD pods sync, and reports of the pods as `kubectl get pods` shows
// them.
package nodeapps

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// Image is an image tarball and the repository:tag it goes under in the fleet's registry.
type Image struct{ Tar, Ref string }

// Images are the tarballs Build wrote: the project's (the manager, and each agent's
// cert-reloader), Argo CD's, Redis's, the hello test image the guestbook runs, and the
// stand-in for argocd-agent's image (test/node/images/argocd-agent), which a GitOpsCluster
// names with spec.argoCDAgentAddon.image; the agents' default image is never given it.
type Images struct {
	Manager, ArgoCD, Redis, Hello, Agent string
	// ManagerTag is the project image's tag in the fleet's registry.
	ManagerTag string
	// ManagerBinary is the project's static binary the image holds: it also runs on this
	// machine, for the commands a person runs, without a second build of the project.
	ManagerBinary string
}

// Tags names each image as the manifests that run it do once spoke.imageRegistry is the
// fleet's registry: the upstream repositories and tags of the components addon's Argo CD, of
// every paired release (the components follow the agents' release), each name once.
func (s Images) Tags(reg string) []Image {
	out := []Image{{s.Manager, ManagerRepository(reg) + ":" + s.ManagerTag}}
	seen := map[string]bool{}
	for _, release := range version.ArgoCDVersions() {
		up, _ := spoke.UpstreamImagesOf(release)
		for _, img := range []Image{{s.ArgoCD, spoke.RewriteRegistry(up.ArgoCD, reg)}, {s.Redis, spoke.RewriteRegistry(up.Redis, reg)}} {
			if !seen[img.Ref] {
				seen[img.Ref] = true
				out = append(out, img)
			}
		}
	}
	out = append(out,
		Image{s.Hello, s.HelloRef(reg)},
		Image{s.Hello, HelloRef(reg, 2)},
	)
	for _, p := range version.Pairs() {
		out = append(out, Image{s.Agent, StandInAgentRef(reg, p.Agent)})
	}
	return out
}

// HelloRef is the hello test image's name in the registry reg.
func (s Images) HelloRef(reg string) string { return HelloRef(reg, 1) }

// HelloRef is the hello test image's name in the registry reg under tag n (1 or 2: one image
// under two names, for a change of image).
func HelloRef(reg string, n int) string { return fmt.Sprintf("%s/e2e/hello:%d", reg, n) }

// StandInAgentRef is the stand-in agent image's name in the registry reg, tagged as the
// argocd-agent release it stands in for ("v0.10.0"): the manager reads an agent's release, and
// pairs its Argo CD, from that tag.
func StandInAgentRef(reg, release string) string {
	return reg + "/e2e/argocd-agent-standin:" + release
}

// Refs are the names of Tags.
func (s Images) Refs(reg string) []string {
	var out []string
	for _, i := range s.Tags(reg) {
		out = append(out, i.Ref)
	}
	return out
}

// ManagerRepository is the project image's repository in the registry reg.
func ManagerRepository(reg string) string { return reg + "/argocd-agent-addon" }

// ChartValues are the chart's values that run the manager from the fleet's registry reg and
// point every image the addon runs on the managed clusters there (the mirror a user of an
// air-gapped network sets with spoke.imageRegistry).
func ChartValues(reg, tag string) map[string]any {
	return map[string]any{
		"image": map[string]any{"repository": ManagerRepository(reg), "tag": tag},
		"spoke": map[string]any{"imageRegistry": reg},
	}
}

// Build builds the images at once, in the background.
type Build struct {
	wg  sync.WaitGroup
	set Images
	err []error
	mu  sync.Mutex
}

// Wait returns the images once every build has ended, with the builds' errors.
func (b *Build) Wait() (Images, []error) {
	b.wg.Wait()
	return b.set, b.err
}

func (b *Build) run(what string, logf func(string, ...any), fn func() error) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		start := time.Now()
		err := fn()
		b.mu.Lock()
		defer b.mu.Unlock()
		if err != nil {
			b.err = append(b.err, fmt.Errorf("building the %s image: %w", what, err))
		} else {
			logf("%s image built in %s", what, time.Since(start).Round(100*time.Millisecond))
		}
	}()
}

// StartBuild builds, in dir, the project's image (as `make image` does, tagged managerTag),
// Argo CD's from the pinned binary, Redis's and the hello test image, each under a placeholder
// name that AddToFleet retags for the fleet's registry. Argo CD's and Redis's are cached by
// content, so later runs find them.
func StartBuild(ctx context.Context, dir, managerTag string, logf func(string, ...any)) *Build {
	root := testenv.RepoRoot()
	b := &Build{set: Images{ManagerTag: managerTag}}
	b.run("project", logf, func() error {
		bin := filepath.Join(dir, "argocd-agent-addon")
		if err := node.BuildStatic(root, "./cmd/argocd-agent-addon", bin); err != nil {
			return err
		}
		b.set.ManagerBinary = bin
		b.set.Manager = filepath.Join(dir, "manager.tar")
		cmd := exec.CommandContext(ctx, "go", "run", "./hack/image", "--binary", bin, "--out", filepath.Join(dir, "oci"), "--tar", b.set.Manager, "--tag", "localhost/argocd-agent-addon:"+managerTag)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	b.run("Argo CD", logf, func() error {
		argo, _, err := fleet.ArgoCDBinaries()
		if err != nil {
			return err
		}
		b.set.ArgoCD, err = node.BuildArgoCDImage(argo, dir, "localhost/argocd:fleet")
		return err
	})
	b.run("redis", logf, func() error {
		var err error
		b.set.Redis, err = node.BuildRedisImage(dir, "localhost/redis:fleet")
		return err
	})
	b.run("hello", logf, func() error {
		bin := filepath.Join(dir, "hello")
		if err := node.BuildStatic(root, "./test/node/images/hello", bin); err != nil {
			return err
		}
		b.set.Hello = filepath.Join(dir, "hello.tar")
		return node.WriteImage(b.set.Hello, node.ImageSpec{Ref: "localhost/hello:fleet", Binary: bin, UID: 65532})
	})
	b.run("stand-in agent", logf, func() error {
		// The binary's name is the process name the cert-reloader signals.
		bin := filepath.Join(dir, addon.AgentProcessName)
		if err := node.BuildStatic(root, "./test/node/images/argocd-agent", bin); err != nil {
			return err
		}
		b.set.Agent = filepath.Join(dir, "argocd-agent-standin.tar")
		return node.WriteImage(b.set.Agent, node.ImageSpec{Ref: "localhost/argocd-agent-standin:fleet", Binary: bin, UID: addon.AgentRunAsUser})
	})
	return b
}

// AddToFleet adds every image to the fleet under its names for the fleet's registry (Tags),
// Argo CD's and Redis's also under the names the pinned install.yaml gives them: pushed to the
// registry and imported into each node's containerd, each image once with all its names.
func AddToFleet(ctx context.Context, f *fleet.Fleet, imgs Images) error {
	argoCD, redis, err := fleet.ArgoCDInstallImages(f.RegistryHost())
	if err != nil {
		return err
	}
	var order []string
	refs := map[string][]string{}
	add := func(tar string, names ...string) {
		if _, ok := refs[tar]; !ok {
			order = append(order, tar)
		}
		for _, n := range names {
			if !slices.Contains(refs[tar], n) {
				refs[tar] = append(refs[tar], n)
			}
		}
	}
	for _, img := range imgs.Tags(f.RegistryHost()) {
		if img.Tar == "" {
			return errors.New("adding " + img.Ref + ": no image was built")
		}
		add(img.Tar, img.Ref)
	}
	add(imgs.ArgoCD, argoCD...)
	add(imgs.Redis, redis...)
	for _, tar := range order {
		if err := f.AddImageAs(ctx, tar, refs[tar]...); err != nil {
			return err
		}
	}
	return nil
}
