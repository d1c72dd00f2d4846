package benchkit

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The roles of the processes whose CPU a Meter reads.
const (
	APIServer = "apiserver"
	Etcd      = "etcd"
	Manager   = "manager"
	Bench     = "bench" // this process: the raw writers, the simulated agents, the polling
)

// Counters are the API server's cumulative request counters and its open watches, from one
// scrape of its /metrics.
type Counters struct {
	// Requests counts apiserver_request_total by "VERB resource" ("resource/subresource" where
	// there is one). A WATCH is counted when it opens.
	Requests map[string]int
	// Events counts apiserver_watch_events_total: the events sent to all watchers together,
	// by resource.
	Events map[string]int
	// Watchers counts the watches open now (apiserver_longrunning_requests, verb WATCH), by
	// resource.
	Watchers map[string]int
	// Flows counts the requests API Priority and Fairness dispatched
	// (apiserver_flowcontrol_dispatched_requests_total) by "flow schema/priority level": which
	// class the API server gave each caller's requests.
	Flows map[string]int
}

// Reading is what the processes of each role and the API server had used at one instant.
type Reading struct {
	At  time.Time
	CPU map[string]time.Duration
	API Counters
}

// Meter takes Readings.
type Meter struct {
	// Pids are the processes of each role; a role may be added while the meter is in use
	// (the manager, once started).
	Pids map[string][]int
	// CPUOf reads a process's CPU time (ProcessCPU by default).
	CPUOf func(pid int) time.Duration
	// Scrape returns the API server's /metrics text (nil: no API counters).
	Scrape func(ctx context.Context) ([]byte, error)
}

// NewMeter meters the API server of cfg and the kube-apiserver and etcd this process started,
// and this process as Bench.
func NewMeter(cfg *rest.Config) (*Meter, error) {
	apiServers, err := ChildrenNamed("kube-apiserver")
	if err != nil {
		return nil, err
	}
	etcds, err := ChildrenNamed("etcd")
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Meter{
		Pids:  map[string][]int{APIServer: apiServers, Etcd: etcds, Bench: {ProcessSelf()}},
		CPUOf: ProcessCPU,
		Scrape: func(ctx context.Context) ([]byte, error) {
			return cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		},
	}, nil
}

// Read takes a reading: the CPU first, so that the scrape's own cost falls into the phase
// that starts here rather than into the one that ends here.
func (m *Meter) Read(ctx context.Context) (Reading, error) {
	r := Reading{At: time.Now(), CPU: map[string]time.Duration{}}
	cpuOf := m.CPUOf
	if cpuOf == nil {
		cpuOf = ProcessCPU
	}
	for role, pids := range m.Pids {
		for _, pid := range pids {
			r.CPU[role] += cpuOf(pid)
		}
	}
	if m.Scrape == nil {
		return r, nil
	}
	raw, err := m.Scrape(ctx)
	if err != nil {
		return r, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	r.API, err = ParseCounters(raw)
	return r, err
}

// ParseCounters reads Counters from the text of the API server's /metrics.
func ParseCounters(raw []byte) (Counters, error) {
	c := Counters{Requests: map[string]int{}, Events: map[string]int{}, Watchers: map[string]int{}, Flows: map[string]int{}}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, labels, value, ok := series(sc.Text())
		if !ok {
			continue
		}
		resource := labels["resource"]
		if labels["subresource"] != "" {
			resource += "/" + labels["subresource"]
		}
		switch name {
		case "apiserver_request_total":
			c.Requests[labels["verb"]+" "+resource] += value
		case "apiserver_watch_events_total":
			if resource == "" {
				resource = labels["kind"]
			}
			c.Events[resource] += value
		case "apiserver_longrunning_requests":
			if labels["verb"] == "WATCH" {
				c.Watchers[resource] += value
			}
		case "apiserver_flowcontrol_dispatched_requests_total":
			c.Flows[labels["flow_schema"]+"/"+labels["priority_level"]] += value
		}
	}
	return c, sc.Err()
}

// series splits one line of the metrics text: name{labels} value.
func series(line string) (name string, labels map[string]string, value int, ok bool) {
	open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if strings.HasPrefix(line, "#") || open < 0 || end < open {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
	if err != nil {
		return "", nil, 0, false
	}
	labels = map[string]string{}
	for _, kv := range splitLabels(line[open+1 : end]) {
		if k, val, found := strings.Cut(kv, "="); found {
			labels[k] = strings.Trim(val, `"`)
		}
	}
	return line[:open], labels, int(v), true
}

// splitLabels splits k="v",k2="v2" at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	quoted, from := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[from:i])
				from = i + 1
			}
		}
	}
	if from < len(s) {
		out = append(out, s[from:])
	}
	return out
}

// Cost is what one phase cost: the difference of two readings.
type Cost struct {
	Took     time.Duration
	CPU      map[string]time.Duration
	Requests map[string]int
	Events   map[string]int
	// Watchers are the watches open at the phase's end.
	Watchers map[string]int
	// Flows are the requests dispatched by flow schema and priority level.
	Flows map[string]int
}

// Since is the cost of the phase from before to r.
func (r Reading) Since(before Reading) Cost {
	c := Cost{Took: r.At.Sub(before.At), CPU: map[string]time.Duration{}, Watchers: r.API.Watchers,
		Requests: diff(before.API.Requests, r.API.Requests), Events: diff(before.API.Events, r.API.Events),
		Flows: diff(before.API.Flows, r.API.Flows)}
	for role, d := range r.CPU {
		c.CPU[role] = d - before.CPU[role]
	}
	return c
}

func diff(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Servers is the API server's and etcd's CPU.
func (c Cost) Servers() time.Duration { return c.CPU[APIServer] + c.CPU[Etcd] }

// writeVerbs are the request verbs that change stored state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// Writes are the phase's write requests by resource, as the project's tests count them:
// leases (the API server renews its own) and SubjectAccessReviews (questions, never stored)
// left out.
func (c Cost) Writes() map[string]int {
	return c.byResource(func(verb string) bool { return writeVerbs[verb] })
}

// Reads are the phase's GET and LIST requests by resource.
func (c Cost) Reads() map[string]int {
	return c.byResource(func(verb string) bool { return verb == "GET" || verb == "LIST" })
}

func (c Cost) byResource(verbOK func(string) bool) map[string]int {
	out := map[string]int{}
	for k, n := range c.Requests {
		verb, resource, _ := strings.Cut(k, " ")
		if !verbOK(verb) || resource == "leases" || resource == "subjectaccessreviews" {
			continue
		}
		out[resource] += n
	}
	return out
}

// Total sums a count by resource.
func Total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Sorted formats a count by key, in the keys' order.
func Sorted(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, m[k])
	}
	return "[" + strings.Join(parts, " ") + "]"
}
