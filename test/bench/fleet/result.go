package main

import (
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
)

type result struct {
	ready  time.Duration
	synced time.Duration // from the manager's start until it reported ready
	// rawCPU is the plain raw writer's phase, rawInformedCPU the raw writer that keeps an
	// informer on its Secrets (a watch fan-out of one), rawAfterCPU the plain one again after
	// the fleet's deletion.
	rawCPU, rawInformedCPU, rawAfterCPU cpuShare
	// registration is from the GitOpsCluster's creation to Ready; its client is the manager,
	// and its cost also holds this process's polling (benchkit.Bench).
	registration cpuShare
	join         time.Duration
	joinCalls    map[string]int
	wave         time.Duration
	waveCreated  time.Duration // until the agents' last CSR was created
	// writesPerCluster counts the registration's writes until 2 s after Ready, except the
	// components' probes: one ManifestWork per cluster that the manager's pass creates after
	// its status write, a few hundred per second, so how many fall before the count is a
	// matter of when it is taken. probesPerCluster counts every ManifestWork write from the
	// GitOpsCluster's creation until the writes stop.
	writesPerCluster, probesPerCluster float64
	byResource                         map[string]int
	// settle is how long after Ready the manager's writes stopped, settleWrites what it wrote
	// in that time (a new fleet's probes).
	settle       time.Duration
	settleWrites map[string]int
	// idleWrites are the writes while the settled fleet idled for idleFor, and idleManagerCPU
	// the manager's CPU meanwhile.
	idleWrites     int
	idleWritten    map[string]int
	idleFor        time.Duration
	idleManagerCPU time.Duration
	// waveCPU is the renewal wave; its client is the manager, and waveAgentsCPU is this
	// process (the agents' requests and the benchmark's watch of the CSRs).
	waveCPU       cpuShare
	waveAgentsCPU time.Duration
	// rawCSR are the raw CSR paces before the manager starts, rawCSRAfter the same once the
	// wave's writes stopped, on the API server the wave ran on; rawAfterManagerCPU is what the
	// manager used meanwhile.
	rawCSR, rawCSRAfter csrPaces
	rawAfterManagerCPU  time.Duration
	deletion            deletion
	memory              benchkit.Memory
	// profiles is the path prefix of the run's profiles ("" without --profiles).
	profiles string
}

// managerPerCluster is the manager's CPU until Ready per registered cluster.
func (r *result) managerPerCluster(n int) time.Duration {
	return benchkit.PerUnit(r.registration.client, n)
}

// managerPerCertificate is the manager's CPU in the wave per renewed certificate.
func (r *result) managerPerCertificate(n int) time.Duration {
	return benchkit.PerUnit(r.waveCPU.client, n)
}

// managerPerIdleMinute is the manager's CPU per minute of the idle fleet.
func (r *result) managerPerIdleMinute() time.Duration {
	return benchkit.PerMinute(r.idleManagerCPU, r.idleFor)
}

// figures adds the run's headline figures to the table of the runs of its size.
func (r *result) figures(t *benchkit.Table, n int) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	t.Add("time to Ready", "%.2f s", r.ready.Seconds())
	t.Add("raw writes", "%.2f s", r.rawCPU.took.Seconds())
	t.Add("raw writes, one informer", "%.2f s", r.rawInformedCPU.took.Seconds())
	t.Add("raw writes after the deletion", "%.2f s", r.rawAfterCPU.took.Seconds())
	t.Add("time to Ready / raw", "%.2f", benchkit.Ratio(r.ready, r.rawCPU.took))
	t.Add("time to Ready / raw, one informer (<= 1.2)", "%.2f", benchkit.Ratio(r.ready, r.rawInformedCPU.took))
	t.Add("API server+etcd CPU per registered cluster", "%.3f ms", ms(benchkit.PerUnit(r.registration.servers, n)))
	t.Add("API server+etcd CPU per raw create", "%.3f ms", ms(benchkit.PerUnit(r.rawCPU.servers, n)))
	t.Add("API server+etcd CPU per raw create, one informer", "%.3f ms", ms(benchkit.PerUnit(r.rawInformedCPU.servers, n)))
	t.Add("API server+etcd CPU, registration / raw", "%.2f", benchkit.Ratio(r.registration.servers, r.rawCPU.servers))
	t.Add("API server+etcd CPU, registration / raw, one informer (<= 1.2)", "%.2f", benchkit.Ratio(r.registration.servers, r.rawInformedCPU.servers))
	t.Add("manager CPU per registered cluster (<= 1 ms)", "%.3f ms", ms(r.managerPerCluster(n)))
	t.Add("manager CPU per renewed certificate", "%.3f ms", ms(r.managerPerCertificate(n)))
	t.Add("manager CPU per idle minute", "%.1f ms", ms(r.managerPerIdleMinute()))
	t.Add("writes per cluster (<= 1.05)", "%.3f", r.writesPerCluster)
	t.Add("idle writes (0)", "%.0f", float64(r.idleWrites))
	t.Add("one join (<= 1 s)", "%.0f ms", ms(r.join))
	t.Add("one join's writes (3)", "%.0f", float64(benchkit.Total(r.joinCalls)))
	t.Add("renewal wave", "%.0f CSR/s", float64(n)/r.wave.Seconds())
	t.Add("wave / 4-write raw pace", "%.2f", benchkit.Ratio(r.rawCSR.four.took, r.wave))
	t.Add("wave / 4-write raw pace, signer's informers (>= 0.9)", "%.2f", benchkit.Ratio(r.rawCSR.fourInformed.took, r.wave))
	t.Add("wave / 4-write raw pace after the wave", "%.2f", benchkit.Ratio(r.rawCSRAfter.four.took, r.wave))
	t.Add("wave / 4-write raw pace, signer's informers, after the wave", "%.2f", benchkit.Ratio(r.rawCSRAfter.fourInformed.took, r.wave))
	t.Add("peak RSS (<= 250 MiB)", "%.1f MiB", float64(r.memory.PeakKiB)/1024)
}

// csrPaces are the raw CSR paces of one point of a run: 3 writes per request (the least any
// signer can write), 4 (a ledger record before each certificate: the least a signer that
// records what it issues can write), and 4 by a writer that keeps informers on the CSRs and
// ledgers it writes, as a signer must to learn of requests (a watch fan-out of one each).
type csrPaces struct{ three, four, fourInformed cpuShare }
