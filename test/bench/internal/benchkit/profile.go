package benchkit

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Kind is one kind of work in a CPU profile: a sample is of the first Kind one of whose
// Frames (substrings of a function's name) appears anywhere in its stack.
type Kind struct {
	Name   string
	Frames []string
}

// APIServerKinds sort the API server's CPU by the request or background work it served.
var APIServerKinds = []Kind{
	{"metrics scrapes", []string{"promhttp.", "metrics.HandlerWithReset"}},
	{"watch: sending events", []string{"cacheWatcher", "serveWatch", "WatchServer", "watchcache.", "(*Cacher).dispatchEvent"}},
	{"watch: reading etcd's stream", []string{"etcd3.(*watchChan)", "storage/etcd3.(*watcher)", "(*Cacher).processEvent", "(*watchCache)."}},
	// Parts of every request, before the handler they sit in.
	{"authorization (RBAC; none for system:masters)", []string{"authorizer/rbac."}},
	{"admission (policies, webhooks)", []string{"admission/plugin/policy", "admission/plugin/webhook", "(*auditHandler).Validate", "(*auditHandler).Admit"}},
	{"field manager (managed fields)", []string{"util/managedfields"}},
	{"create", []string{"handlers.CreateResource", "createHandler"}},
	{"update", []string{"handlers.UpdateResource"}},
	{"patch and apply", []string{"handlers.PatchResource"}},
	{"delete", []string{"handlers.DeleteResource", "handlers.DeleteCollection"}},
	{"get", []string{"handlers.GetResource"}},
	{"list", []string{"handlers.ListResource"}},
	{"other requests (filters, discovery, authentication)", []string{"net/http.(*conn).serve", "http2.(*serverConn)"}},
	{"garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.bgsweep", "runtime.bgscavenge"}},
	{"etcd client", []string{"go.etcd.io/etcd/client", "google.golang.org/grpc"}},
}

// ProfileByKind sums a CPU profile's samples by kind (the samples of no kind as "other") with
// `go tool pprof -traces`, and returns the sums and the profile's total.
func ProfileByKind(path string, kinds []Kind) (map[string]time.Duration, time.Duration, error) {
	out, err := exec.Command("go", "tool", "pprof", "-traces", path).Output()
	if err != nil {
		return nil, 0, fmt.Errorf("go tool pprof -traces %s: %w", path, err)
	}
	return tracesByKind(out, kinds)
}

// tracesByKind reads the text of `go tool pprof -traces`: samples separated by lines of
// dashes, each a value before its leaf frame and the callers below it.
func tracesByKind(text []byte, kinds []Kind) (map[string]time.Duration, time.Duration, error) {
	sums := map[string]time.Duration{}
	var total, value time.Duration
	var frames []string
	flush := func() {
		if value > 0 {
			sums[kindOf(frames, kinds)] += value
			total += value
		}
		value, frames = 0, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	started := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			started = true
			continue
		}
		if !started || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		// A sample's first line starts with its value; the lines of its callers do not.
		if v, err := time.ParseDuration(f[0]); err == nil && len(f) >= 2 {
			value, frames = v, append(frames, f[1])
			continue
		}
		frames = append(frames, f[0])
	}
	flush()
	return sums, total, sc.Err()
}

func kindOf(frames []string, kinds []Kind) string {
	for _, k := range kinds {
		for _, want := range k.Frames {
			for _, f := range frames {
				if strings.Contains(f, want) {
					return k.Name
				}
			}
		}
	}
	return "other"
}
