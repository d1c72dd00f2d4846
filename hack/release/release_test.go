package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const changelog = `# Changelog

## Unreleased

- Something after the release.

## v1.2.3

The release's own notes.

- One change.

## v1.2.2

- An older one.
`

// checkout makes a git repository holding the project's chart and a CHANGELOG with a v1.2.3
// section, committed: what a release reads.
func checkout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(testenv.RepoRoot(), "charts", "argocd-agent-addon")
	dst := filepath.Join(dir, "charts", "argocd-agent-addon")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-R", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte(changelog), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "release"},
	} {
		if _, err := git(dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReleaseRefuses: a malformed version, an image tagged otherwise, a version the CHANGELOG
// has no section for, and uncommitted changes each stop a release, saying what to do.
func TestReleaseRefuses(t *testing.T) {
	dir := checkout(t)
	ok := release{Version: "v1.2.3", Image: "registry.example.com/gitops/argocd-agent-addon:v1.2.3", Root: dir}
	if err := ok.check(); err != nil {
		t.Fatalf("a clean tree with the version's section: %v", err)
	}
	for _, v := range []string{"", "1.2.3", "v1.2", "v1.2.3+build", "v01.2.3", "ae1abc4-dirty"} {
		r := ok
		r.Version, r.Image = v, "registry.example.com/gitops/argocd-agent-addon:"+strings.NewReplacer("+", "_").Replace(v)
		if err := r.check(); err == nil || !strings.Contains(err.Error(), "not a release version") {
			t.Errorf("version %q: want a refusal, got %v", v, err)
		}
	}
	r := ok
	r.Image = "argocd-agent-addon:v1.2.3"
	if err := r.check(); err == nil || !strings.Contains(err.Error(), "names no registry") {
		t.Errorf("an image without a registry (make's default IMAGE): %v", err)
	}
	r = ok
	r.Image = "registry.example.com/gitops/argocd-agent-addon:latest"
	if err := r.check(); err == nil || !strings.Contains(err.Error(), "not the version") {
		t.Errorf("an image tag other than the version: %v", err)
	}
	r = ok
	r.Version, r.Image = "v1.2.4", "registry.example.com/gitops/argocd-agent-addon:v1.2.4"
	if err := r.check(); err == nil || !strings.Contains(err.Error(), "no section for v1.2.4") {
		t.Errorf("no CHANGELOG section: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "charts", "argocd-agent-addon", "values.yaml"), []byte("replicas: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ok.check(); err == nil || !strings.Contains(err.Error(), "uncommitted changes") {
		t.Errorf("a changed file: %v", err)
	}
	if _, err := git(dir, "checkout", "--", "."); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ok.check(); err == nil || !strings.Contains(err.Error(), "uncommitted changes") {
		t.Errorf("an untracked file: %v", err)
	}
	if err := ok.pack(t.TempDir()); err == nil {
		t.Error("package from a dirty tree: no refusal")
	}
}

// TestMakeReleaseRefusesBeforeBuilding: `make release` without a release version stops at the
// check, before anything is compiled.
func TestMakeReleaseRefusesBeforeBuilding(t *testing.T) {
	bin := t.TempDir()
	cmd := exec.Command("make", "release", "VERSION=v1.2", "BIN="+bin)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a release version") {
		t.Fatalf("make release VERSION=v1.2: want a refusal, got %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(bin); len(entries) != 0 {
		t.Errorf("make release built %v before refusing", entries)
	}
}

// TestReleasePackagesAVersionedChart: the packaged chart is the release's version, its
// appVersion is the image tag, and installed with no values it runs the released image (the
// manager and the agents' cert-reloader); the notes are the CHANGELOG's section.
func TestReleasePackagesAVersionedChart(t *testing.T) {
	dir := checkout(t)
	out := t.TempDir()
	r := release{Version: "v1.2.3", Image: "registry.example.com/gitops/argocd-agent-addon:v1.2.3", Root: dir}
	if err := r.pack(out); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(filepath.Join(out, "argocd-agent-addon-1.2.3.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.2.3" || ch.Metadata.AppVersion != "v1.2.3" {
		t.Errorf("chart version %q appVersion %q", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "argocd-agent-addon", "open-cluster-management"
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.0", Major: "1", Minor: "36"}
	rel, err := install.Run(ch, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"image: registry.example.com/gitops/argocd-agent-addon:v1.2.3", "--reloader-image=registry.example.com/gitops/argocd-agent-addon:v1.2.3"} {
		if !strings.Contains(rel.Manifest, want) {
			t.Errorf("the packaged chart does not render %q", want)
		}
	}
	if strings.Contains(rel.Info.Notes, "WARNING") {
		t.Errorf("the packaged chart warns about its image:\n%s", rel.Info.Notes)
	}
	notes, err := os.ReadFile(filepath.Join(out, "RELEASE-NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := string(notes); !strings.HasPrefix(n, "## v1.2.3\n") || !strings.Contains(n, "One change.") || strings.Contains(n, "older") || strings.Contains(n, "after the release") {
		t.Errorf("release notes:\n%s", n)
	}
}

// TestMakeHelpShowsSections: `make help` prints each section of the Makefile as a heading,
// with its targets under it, the release among them.
func TestMakeHelpShowsSections(t *testing.T) {
	cmd := exec.Command("make", "-s", "help")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	section := ""
	under := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case line == "":
		case !strings.HasPrefix(line, " "):
			section = line
		default:
			under[strings.Fields(line)[0]] = section
		}
	}
	for target, want := range map[string]string{"build": "Build", "image": "Build", "release": "Release", "lint": "Checks and tests", "demo": "Run"} {
		if under[target] != want {
			t.Errorf("make help lists %s under %q, want %q:\n%s", target, under[target], want, out)
		}
	}
}
