package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// profileDir, when set, receives CPU profiles of the API server and of the manager, and the
// manager's allocations, taken at the start of each measured phase (--profiles).
var profileDir string

// profileSeconds is how much of each phase a profile covers (--profile-seconds). A phase
// shorter than that waits for its profiles to end before the next phase starts, since a
// process takes one CPU profile at a time; its profile then also covers what follows it (the
// raw writes' deletion, the probes after Ready).
var profileSeconds = 12

// profiler takes the CPU profiles of one fleet size in the background.
type profiler struct {
	apiServer   *http.Client
	apiHost     string
	managerAddr string // the manager's pprof address, once it runs
	prefix      string // the fleet size and run, so that every run keeps its profiles
	wg          sync.WaitGroup
	mu          sync.Mutex
	written     []string
	errs        []error
}

func newProfiler(cfg *rest.Config, prefix string) (*profiler, error) {
	if profileDir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(profileDir, 0o755); err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &profiler{apiServer: hc, apiHost: strings.TrimSuffix(cfg.Host, "/"), prefix: prefix}, nil
}

// phase starts the profiles of a phase, once those of the phase before have ended: the API
// server's, and the manager's once it runs.
func (p *profiler) phase(name string) {
	if p == nil {
		return
	}
	p.wg.Wait()
	p.fetch(p.apiServer, p.apiHost, "profile", p.prefix+name+"-apiserver.pprof")
	if p.managerAddr != "" {
		p.fetch(http.DefaultClient, "http://"+p.managerAddr, "profile", p.prefix+name+"-manager.pprof")
		// What the manager allocated over the same seconds: its collector's work follows it.
		p.fetch(http.DefaultClient, "http://"+p.managerAddr, "allocs", p.prefix+name+"-manager-allocs.pprof")
	}
}

// fetch takes one profile of kind (a /debug/pprof/ endpoint that takes seconds) into file.
func (p *profiler) fetch(c *http.Client, host, kind, file string) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		path := filepath.Join(profileDir, file)
		err := fetchProfile(c, host, kind, path)
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("profile %s: %w", file, err))
			return
		}
		p.written = append(p.written, file)
	}()
}

func fetchProfile(c *http.Client, host, kind, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(profileSeconds+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", host, kind, profileSeconds), nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// wait waits for the profiles still being taken and says which were written and which failed.
// It may be called more than once.
func (p *profiler) wait() {
	if p == nil {
		return
	}
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, err := range p.errs {
		fmt.Fprintln(os.Stderr, "fleet benchmark:", err)
	}
	if len(p.written) > 0 {
		fmt.Fprintf(os.Stderr, "profiles of the first %d s of each phase in %s: %s\n", profileSeconds, profileDir, strings.Join(p.written, " "))
	}
	p.written, p.errs = nil, nil
}

// settle waits for the profiles being taken, so that the work after a phase (deleting what it
// made) is not in the phase's profile.
func (p *profiler) settle() {
	if p != nil {
		p.wg.Wait()
	}
}
