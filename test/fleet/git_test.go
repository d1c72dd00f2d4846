package fleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitServer: a clone over HTTP gets what Commit wrote, a second commit replaces it, and a
// push is refused.
func TestGitServer(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := t.TempDir()
	g, err := StartGitServer(filepath.Join(dir, "server"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := g.Close(); err != nil {
			t.Errorf("closing: %v", err)
		}
	}()
	repo, err := g.CreateRepo("guestbook")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.CreateRepo("guestbook"); err == nil {
		t.Error("creating the same repository twice succeeded")
	}
	if _, err := g.CreateRepo("../escape"); err == nil {
		t.Error("a repository name with a path was accepted")
	}
	if _, err := repo.Commit(map[string]string{"../x": "y"}, "bad"); err == nil {
		t.Error("a file outside the repository was accepted")
	}

	first, err := repo.Commit(GuestbookFiles(1, "nginx:1"), "first")
	if err != nil {
		t.Fatal(err)
	}
	other, err := g.CreateRepo("never-fetched")
	if err != nil {
		t.Fatal(err)
	}
	if n := repo.Requests(); n != 0 {
		t.Errorf("%d requests counted before any fetch", n)
	}
	clone := filepath.Join(dir, "clone")
	if _, err := runGit("", "clone", "--quiet", "--branch=main", repo.URL, clone); err != nil {
		t.Fatal(err)
	}
	if repo.Requests() == 0 || other.Requests() != 0 {
		t.Errorf("requests after one clone: %d for the cloned repository, %d for the other; want some and none", repo.Requests(), other.Requests())
	}
	assertHead(t, clone, first)
	deploy := filepath.Join(clone, "guestbook", "guestbook-ui-deployment.yaml")
	assertContains(t, deploy, "replicas: 1")

	files := GuestbookFiles(2, "nginx:2")
	delete(files, "guestbook/guestbook-ui-svc.yaml")
	second, err := repo.Commit(files, "second")
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatalf("second commit has the first one's SHA %s", first)
	}
	if _, err := runGit(clone, "pull", "--quiet", "--ff-only"); err != nil {
		t.Fatal(err)
	}
	assertHead(t, clone, second)
	assertContains(t, deploy, "replicas: 2")
	if _, err := os.Stat(filepath.Join(clone, "guestbook", "guestbook-ui-svc.yaml")); !os.IsNotExist(err) {
		t.Errorf("a file left out of the second commit is still there (stat: %v)", err)
	}

	if err := os.WriteFile(filepath.Join(clone, "pushed"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runGit(clone, "add", "pushed"); err != nil {
		t.Fatal(err)
	}
	if _, err := runGit(clone, "commit", "--quiet", "-m", "push"); err != nil {
		t.Fatal(err)
	}
	if _, err := runGit(clone, "push", "--quiet", "origin", "HEAD:main"); err == nil {
		t.Error("a push over HTTP was accepted")
	}
}

func assertHead(t *testing.T, dir, want string) {
	t.Helper()
	got, err := runGit(dir, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(got) != want {
		t.Errorf("clone HEAD = %s, want %s", strings.TrimSpace(got), want)
	}
}

func assertContains(t *testing.T, path, want string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), want) {
		t.Errorf("%s does not contain %q:\n%s", path, want, data)
	}
}
