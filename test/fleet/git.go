package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// GitServer serves Git repositories over smart HTTP on 127.0.0.1, so that Argo CD's repo-server
// clones real commits with the same `git` it uses against any Git host, and no test needs the
// internet. It runs `git http-backend` (part of every Git installation, and the repo-server
// needs `git` anyway) through net/http/cgi; the repositories are bare repositories in one
// folder, read-only over HTTP (no receive-pack) and changed with GitRepo.Commit.
type GitServer struct {
	root string // served bare repositories
	work string // working copies that commits are made in
	url  string
	srv  *http.Server
	done chan error

	mu       sync.Mutex
	requests map[string]int // HTTP requests per served repository, "<name>.git"
}

// StartGitServer serves the bare repositories in dir/repos on loopback; their working copies go
// to dir/work. Close stops it.
func StartGitServer(dir string) (*GitServer, error) { return StartGitServerOn(dir, "127.0.0.1") }

// StartGitServerOn is StartGitServer listening on host, for example Fleet.HostAddress, which
// pods of a fleet with real nodes reach.
func StartGitServerOn(dir, host string) (*GitServer, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("the local Git server needs git: %w", err)
	}
	root, work := filepath.Join(dir, "repos"), filepath.Join(dir, "work")
	for _, d := range []string{root, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	g := &GitServer{root: root, work: work, url: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	backend := &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		Dir:  root,
		Env: append(gitEnv(),
			"GIT_PROJECT_ROOT="+root,
			// Serve every repository under root without a git-daemon-export-ok marker.
			"GIT_HTTP_EXPORT_ALL=1",
		),
	}
	g.requests = map[string]int{}
	g.srv = &http.Server{Handler: g.counted(readOnly(backend)), ReadHeaderTimeout: 10 * time.Second}
	go func() { g.done <- g.srv.Serve(ln) }()
	return g, nil
}

// readOnly refuses pushes: the repositories change only through GitRepo.Commit, so what a
// test committed is exactly what Argo CD sees.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack" {
			http.Error(w, "read-only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// counted records which repository each request asks for, so that a test can tell that a
// repository was never fetched.
func (g *GitServer) counted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		repo, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		g.mu.Lock()
		g.requests[repo]++
		g.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// URL is the server's base URL; a repository is at URL/<name>.git.
func (g *GitServer) URL() string { return g.url }

// Close stops serving.
func (g *GitServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := g.srv.Shutdown(ctx)
	if serveErr := <-g.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

var repoName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// CreateRepo creates an empty bare repository <name>.git with branch main, and a working
// copy outside the served folder that Commit writes through.
func (g *GitServer) CreateRepo(name string) (*GitRepo, error) {
	if !repoName.MatchString(name) {
		return nil, fmt.Errorf("repository name %q: want lowercase letters, digits and dashes", name)
	}
	r := &GitRepo{
		URL:    g.url + "/" + name + ".git",
		server: g,
		name:   name + ".git",
		bare:   filepath.Join(g.root, name+".git"),
		work:   filepath.Join(g.work, name),
	}
	if _, err := os.Stat(r.bare); err == nil {
		return nil, fmt.Errorf("repository %s exists", r.bare)
	}
	if _, err := runGit("", "init", "--quiet", "--bare", "--initial-branch=main", r.bare); err != nil {
		return nil, err
	}
	if _, err := runGit("", "init", "--quiet", "--initial-branch=main", r.work); err != nil {
		return nil, err
	}
	if _, err := runGit(r.work, "remote", "add", "origin", r.bare); err != nil {
		return nil, err
	}
	return r, nil
}

// GitRepo is one repository of a GitServer.
type GitRepo struct {
	// URL is what an Argo CD Application's spec.source.repoURL names.
	URL    string
	server *GitServer
	name   string
	bare   string
	work   string
	mu     sync.Mutex
}

// Requests is how many HTTP requests the server has had for this repository: 0 means nobody
// ever fetched it.
func (r *GitRepo) Requests() int {
	r.server.mu.Lock()
	defer r.server.mu.Unlock()
	return r.server.requests[r.name]
}

// Commit makes the files (path relative to the repository root -> content) the repository's
// whole content on main, as one new commit, and returns the commit's SHA. Files not named are
// removed.
func (r *GitRepo) Commit(files map[string]string, message string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	entries, err := os.ReadDir(r.work)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			if err := os.RemoveAll(filepath.Join(r.work, e.Name())); err != nil {
				return "", err
			}
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		clean := filepath.Clean(p)
		if filepath.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") ||
			clean == ".git" || strings.HasPrefix(clean, ".git/") {
			return "", fmt.Errorf("file %q: want a path inside the repository", p)
		}
		full := filepath.Join(r.work, clean)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
			return "", err
		}
	}
	if _, err := runGit(r.work, "add", "--all"); err != nil {
		return "", err
	}
	if _, err := runGit(r.work, "commit", "--quiet", "--allow-empty", "-m", message); err != nil {
		return "", err
	}
	if _, err := runGit(r.work, "push", "--quiet", "origin", "HEAD:refs/heads/main"); err != nil {
		return "", err
	}
	sha, err := runGit(r.work, "rev-parse", "HEAD")
	return strings.TrimSpace(sha), err
}

// gitEnv is the environment of every git the harness runs: no system or user configuration
// (so a developer's ~/.gitconfig changes nothing) and a fixed identity for commits.
func gitEnv() []string {
	env := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=fleet", "GIT_AUTHOR_EMAIL=fleet@example.invalid",
		"GIT_COMMITTER_NAME=fleet", "GIT_COMMITTER_EMAIL=fleet@example.invalid"}
	if p := os.Getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	}
	return env
}

func runGit(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
