package benchkit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeHub is a machine whose processes' CPU and API server counters the test sets.
type fakeHub struct {
	cpu      map[int]time.Duration
	requests map[string]int // "verb resource subresource"
	events   map[string]int
	watchers map[string]int
}

func (h *fakeHub) metrics(context.Context) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# HELP apiserver_request_total a counter\n")
	for k, n := range h.requests {
		f := strings.Fields(k + " ")
		sub := ""
		if len(f) > 2 {
			sub = f[2]
		}
		fmt.Fprintf(&b, "apiserver_request_total{code=\"201\",component=\"apiserver\",resource=%q,scope=\"resource\",subresource=%q,verb=%q,version=\"v1\"} %d\n", f[1], sub, f[0], n)
	}
	for r, n := range h.events {
		fmt.Fprintf(&b, "apiserver_watch_events_total{group=\"\",resource=%q,version=\"v1\"} %d\n", r, n)
	}
	for r, n := range h.watchers {
		fmt.Fprintf(&b, "apiserver_longrunning_requests{component=\"apiserver\",group=\"\",resource=%q,scope=\"cluster\",subresource=\"\",verb=\"WATCH\",version=\"v1\"} %d\n", r, n)
	}
	return []byte(b.String()), nil
}

// TestAccountOfAKnownWorkload feeds the meter a known workload (CPU seconds of each process,
// requests, watch events) and checks that the figures the benchmarks print are what that
// workload costs per unit.
func TestAccountOfAKnownWorkload(t *testing.T) {
	h := &fakeHub{
		cpu:      map[int]time.Duration{10: 7 * time.Second, 11: time.Second, 12: 2 * time.Second, 20: 5 * time.Second, 30: 3 * time.Second},
		requests: map[string]int{"POST secrets": 5, "PUT leases": 100, "GET gitopsclusters": 7},
		events:   map[string]int{"secrets": 10},
		watchers: map[string]int{"secrets": 1},
	}
	m := &Meter{
		// Two API server processes: the reading sums a role's processes.
		Pids:   map[string][]int{APIServer: {10, 11}, Etcd: {12}, Manager: {20}, Bench: {30}},
		CPUOf:  func(pid int) time.Duration { return h.cpu[pid] },
		Scrape: h.metrics,
	}
	ctx := context.Background()
	before, err := m.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The workload: 1,000 clusters registered with one Secret each and one status write, the
	// API server's lease renewed, two watchers told of every Secret, 3 s and 1 s of the API
	// server's two processes, 1 s of etcd, 0.5 s of the manager, 0.25 s of the benchmark.
	h.cpu[10] += 3 * time.Second
	h.cpu[11] += time.Second
	h.cpu[12] += time.Second
	h.cpu[20] += 500 * time.Millisecond
	h.cpu[30] += 250 * time.Millisecond
	h.requests["POST secrets"] += 1000
	h.requests["PUT gitopsclusters status"] = 1
	h.requests["PUT leases"] += 3
	h.requests["GET gitopsclusters"] += 40
	h.requests["WATCH secrets"] = 1
	h.events["secrets"] += 2000
	h.watchers["secrets"] = 2
	after, err := m.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := after.Since(before)
	if c.Servers() != 5*time.Second || c.CPU[Etcd] != time.Second || c.CPU[Manager] != 500*time.Millisecond || c.CPU[Bench] != 250*time.Millisecond {
		t.Errorf("CPU %v (servers %s), want API server 4s, etcd 1s, manager 500ms, bench 250ms", c.CPU, c.Servers())
	}
	if w := c.Writes(); Total(w) != 1001 || w["secrets"] != 1000 || w["gitopsclusters/status"] != 1 {
		t.Errorf("writes %v, want 1,000 Secrets and 1 status write (the lease is not the workload's)", w)
	}
	if r := c.Reads(); Total(r) != 40 {
		t.Errorf("reads %v, want the 40 GETs (a watch is not a read)", r)
	}
	if c.Events["secrets"] != 2000 || c.Watchers["secrets"] != 2 {
		t.Errorf("watch events %v, watchers %v, want 2,000 and 2", c.Events, c.Watchers)
	}
	got := Account("registration", c, Unit{Name: "registered cluster", Count: 1000})
	for _, want := range []string{"API server and etcd 5.00 ms (etcd 1.00 ms)", "manager 0.50 ms", "bench 0.25 ms", "1.001 writes", "2.000 watch events"} {
		if !strings.Contains(got, want) {
			t.Errorf("account %q does not say %q", got, want)
		}
	}
	if PerMinute(3*time.Second, 30*time.Second) != 6*time.Second || PerUnit(time.Second, 0) != 0 {
		t.Error("per minute or per unit of nothing")
	}
}

func TestMedianAndSpread(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 1, 2, 3 is %v", m)
	}
	if m := Median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 1..4 is %v", m)
	}
	if s := Spread([]float64{8, 10, 12}); s != 0.4 {
		t.Errorf("spread of 8, 10, 12 is %v, want 0.4", s)
	}
	var tab Table
	for _, v := range []float64{1.5, 0.5, 1} {
		tab.Add("time to Ready", "%.2f s", v)
	}
	var b strings.Builder
	tab.Print(&b)
	if want := "time to Ready  median 1.00 s  (0.50 s to 1.50 s, spread 100%; runs: 1.50 s, 0.50 s, 1.00 s)"; !strings.Contains(b.String(), want) {
		t.Errorf("table %q, want %q", b.String(), want)
	}
}

// TestTracesByKind sums a profile's samples by the first kind found in each stack.
func TestTracesByKind(t *testing.T) {
	text := `File: kube-apiserver
Duration: 3s, Total samples = 60ms (2%)
-----------+-------------------------------------------------------
      10ms   runtime.mapassign_faststr
             github.com/prometheus/client_golang/prometheus/promhttp.HandlerForTransactional.func1
             net/http.(*conn).serve
-----------+-------------------------------------------------------
      20ms   k8s.io/apiserver/pkg/storage/etcd3.(*store).Create
             k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.createHandler.func1
             net/http.(*conn).serve
-----------+-------------------------------------------------------
      30ms   runtime.scanobject
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
`
	sums, total, err := tracesByKind([]byte(text), APIServerKinds)
	if err != nil {
		t.Fatal(err)
	}
	if total != 60*time.Millisecond || sums["metrics scrapes"] != 10*time.Millisecond || sums["create"] != 20*time.Millisecond || sums["garbage collection"] != 30*time.Millisecond {
		t.Errorf("sums %v of %s", sums, total)
	}
}
