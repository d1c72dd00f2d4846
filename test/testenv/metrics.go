package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// writeVerbs are the request verbs of apiserver_request_total that change stored state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// APIWrites reads the API server's own apiserver_request_total counter and returns the number
// of write requests per resource (with "/subresource" appended where there is one). Leases are
// left out: the API server renews its own identity lease on a timer. SubjectAccessReviews are
// left out too: they are questions, posted but never stored.
func APIWrites(ctx context.Context, cfg *rest.Config) (map[string]int, error) {
	return apiRequests(ctx, cfg, writeVerbs)
}

// readVerbs are the request verbs of apiserver_request_total that read stored state once
// (watches are long-lived and counted when opened, so they are left out).
var readVerbs = map[string]bool{"GET": true, "LIST": true}

// APIReads is APIWrites for reads: GET and LIST requests per resource.
func APIReads(ctx context.Context, cfg *rest.Config) (map[string]int, error) {
	return apiRequests(ctx, cfg, readVerbs)
}

func apiRequests(ctx context.Context, cfg *rest.Config, verbs map[string]bool) (map[string]int, error) {
	return counters(ctx, cfg, "apiserver_request_total", func(labels map[string]string) string {
		if !verbs[labels["verb"]] || labels["resource"] == "leases" || labels["resource"] == "subjectaccessreviews" {
			return ""
		}
		if labels["subresource"] != "" {
			return labels["resource"] + "/" + labels["subresource"]
		}
		return labels["resource"]
	})
}

// WatchEvents reads apiserver_watch_events_total: the events the API server has sent to all
// watchers together, per resource (the initial events of a watch that asked for them
// included).
func WatchEvents(ctx context.Context, cfg *rest.Config) (map[string]int, error) {
	return counters(ctx, cfg, "apiserver_watch_events_total", func(labels map[string]string) string {
		if labels["resource"] != "" {
			return labels["resource"]
		}
		return labels["kind"]
	})
}

// counters sums the API server's counter metric per the key keyOf makes of each series'
// labels, leaving out the series whose key is empty.
func counters(ctx context.Context, cfg *rest.Config, metric string, keyOf func(map[string]string) string) (map[string]int, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver /metrics: %w", err)
	}
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		key := keyOf(parseLabels(line[len(metric)+1 : end]))
		if key == "" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		out[key] += int(v)
	}
	return out, sc.Err()
}

// QuietWrites waits until the API server has seen no write for quiet, and returns the counts at
// that point, so that a test counting the writes of one change does not also count the tail
// of the work before it. It gives up after limit: something that keeps writing is a finding.
func QuietWrites(ctx context.Context, cfg *rest.Config, quiet, limit time.Duration) (map[string]int, error) {
	return QuietWritesOf(ctx, cfg, quiet, limit)
}

// QuietWritesOf is QuietWrites for the named resources only (as APIWrites names them): other
// resources' writes neither hold the wait up nor appear in the counts.
func QuietWritesOf(ctx context.Context, cfg *rest.Config, quiet, limit time.Duration, resources ...string) (map[string]int, error) {
	counts, _, err := AwaitQuiet(ctx, cfg, Quiet{For: quiet, Limit: limit, Resources: resources})
	return counts, err
}

// Quiet says how AwaitQuiet waits for the API server's writes to stop.
type Quiet struct {
	// For is how long no write must be seen; Limit how long the whole wait may take (at least
	// For).
	For, Limit time.Duration
	// Every is how often the counts are read; 200 ms when zero.
	Every time.Duration
	// Resources limits the counts to these resources (as APIWrites names them); nil: all.
	Resources []string
	// From are counts taken earlier to compare the first reading with; nil: the first reading.
	From map[string]int
}

// AwaitQuiet returns the write counts once the API server has taken none for q.For, and when
// the last change was seen (up to q.Every after the write; the start of the wait if none
// was). It gives up after q.Limit, naming the writes seen since the start: something that
// keeps writing is a finding.
func AwaitQuiet(ctx context.Context, cfg *rest.Config, q Quiet) (counts map[string]int, lastChange time.Time, err error) {
	if q.Limit < q.For {
		return nil, time.Time{}, fmt.Errorf("a quiet period of %s cannot be seen within a limit of %s", q.For, q.Limit)
	}
	every := q.Every
	if every == 0 {
		every = 200 * time.Millisecond
	}
	only := func(all map[string]int) map[string]int {
		if len(q.Resources) == 0 {
			return maps.Clone(all)
		}
		some := make(map[string]int, len(q.Resources))
		for _, r := range q.Resources {
			some[r] = all[r]
		}
		return some
	}
	writes := func() (map[string]int, error) {
		all, err := APIWrites(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return only(all), nil
	}
	first := only(q.From)
	if q.From == nil {
		if first, err = writes(); err != nil {
			return nil, time.Time{}, err
		}
	}
	last := first
	lastChange = time.Now()
	giveUp := lastChange.Add(q.Limit)
	for time.Since(lastChange) < q.For {
		// The last wait is cut short at the limit, so that a slow reading interval cannot
		// stretch the limit by up to one interval.
		wait := min(every, time.Until(giveUp))
		if wait <= 0 {
			return nil, time.Time{}, fmt.Errorf("the API server still took writes after %s: %v since the wait began", q.Limit, DiffWrites(first, last))
		}
		select {
		case <-ctx.Done():
			return nil, time.Time{}, fmt.Errorf("waiting for the API server to take no writes for %s: %w; %v since the wait began", q.For, ctx.Err(), DiffWrites(first, last))
		case <-time.After(wait):
		}
		now, err := writes()
		if err != nil {
			return nil, time.Time{}, err
		}
		if len(DiffWrites(last, now)) > 0 {
			last, lastChange = now, time.Now()
		}
	}
	return last, lastChange, nil
}

// TotalWrites sums a map returned by APIWrites.
func TotalWrites(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// DiffWrites returns after minus before, per resource, leaving out zeros.
func DiffWrites(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for len(s) > 0 {
		eq := strings.Index(s, "=\"")
		if eq < 0 {
			break
		}
		name := s[:eq]
		rest := s[eq+2:]
		end := strings.Index(rest, "\"")
		if end < 0 {
			break
		}
		out[name] = rest[:end]
		s = strings.TrimPrefix(rest[end+1:], ",")
	}
	return out
}
