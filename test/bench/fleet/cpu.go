package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
)

// cpuShare is the CPU time the processes that share the machine's cores used in one phase.
type cpuShare struct {
	servers time.Duration // the API server and etcd
	client  time.Duration // the raw writers (this process), or the manager
	took    time.Duration
	// etcd is etcd's part of servers, and compactions how many compactions etcd finished in
	// the phase (one that ends after it is not counted): the API server asks for one every 5
	// minutes, whichever phase runs then.
	etcd        time.Duration
	compactions int
	// cost is the phase's whole account: every role's CPU, requests, watch events.
	cost benchkit.Cost
}

// reading is a benchkit reading with etcd's compactions so far (-1 when unknown).
type reading struct {
	benchkit.Reading
	compactions int
}

func (b *fleetRun) read() (reading, error) {
	r, err := b.meter.Read(b.ctx)
	if err != nil {
		return reading{}, err
	}
	return reading{Reading: r, compactions: b.etcdCompactions()}, nil
}

// share is the phase from before to r, its client being the processes of role.
func (r reading) share(before reading, role string, took time.Duration) cpuShare {
	c := r.Since(before.Reading)
	s := cpuShare{servers: c.Servers(), etcd: c.CPU[benchkit.Etcd], client: c.CPU[role], took: took, cost: c,
		compactions: r.compactions - before.compactions}
	if r.compactions < 0 || before.compactions < 0 {
		s.compactions = -1
	}
	return s
}

// measure runs a phase of this process's own clients (the raw writers, the raw pace's agents
// and signer) once the profiles of the phase before have ended, so that the wait is not
// counted, and returns how long it took and what it cost. The phase's profile ends before
// the caller goes on.
func (b *fleetRun) measure(name string, phase func() (time.Duration, error)) (cpuShare, error) {
	b.prof.phase(name)
	before, err := b.read()
	if err != nil {
		return cpuShare{}, err
	}
	took, err := phase()
	if err != nil {
		return cpuShare{}, err
	}
	after, err := b.read()
	if err != nil {
		return cpuShare{}, err
	}
	b.prof.settle()
	return after.share(before, benchkit.Bench, took), nil
}

// etcdCompactions reads how many compactions etcd has finished from its metrics (-1 when they
// cannot be read).
func (b *fleetRun) etcdCompactions() int {
	cp := b.env.Environment.ControlPlane
	if cp.Etcd == nil || cp.Etcd.URL == nil {
		return -1
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(cp.Etcd.URL.String() + "/metrics")
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const metric = "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count "
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), metric); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return int(n)
		}
	}
	return -1
}

// compactionsSaid says how many compactions etcd finished in the phase.
func (c cpuShare) compactionsSaid() string {
	if c.compactions < 0 {
		return "compactions unknown"
	}
	return fmt.Sprintf("%d compaction(s)", c.compactions)
}

// busy is how many cores the phase kept busy on average.
func (c cpuShare) busy() float64 { return (c.servers + c.client).Seconds() / c.took.Seconds() }

// floor is how long the phase's CPU would take with every core busy all the time: no phase
// that needs this CPU can be faster on this machine.
func (c cpuShare) floor(cores int) time.Duration {
	return (c.servers + c.client) / time.Duration(cores)
}

// perCluster is d over the fleet's clusters, in ms.
func perCluster(d time.Duration, n int) string { return benchkit.Ms(benchkit.PerUnit(d, n)) }
