package main

import (
	"runtime"
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
)

// r10 rounds to 10 ms for printing.
func r10(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// printRun prints one run's figures.
func printRun(out *benchkit.Output, n, run int, r *result) {
	out.Printf("%d clusters, run %d: time to Ready %s; raw writes %s (ratio %.2f), with one informer %s (ratio %.2f), after the deletion %s (ratio %.2f); %.3f writes per cluster; %d idle writes in %s; peak RSS %s (largest anonymous part %s)\n",
		n, run, r10(r.ready), r10(r.rawCPU.took), benchkit.Ratio(r.ready, r.rawCPU.took), r10(r.rawInformedCPU.took), benchkit.Ratio(r.ready, r.rawInformedCPU.took),
		r10(r.rawAfterCPU.took), benchkit.Ratio(r.ready, r.rawAfterCPU.took), r.writesPerCluster, r.idleWrites, r.idleFor.Round(time.Second),
		benchkit.MiB(r.memory.PeakKiB), benchkit.MiB(r.memory.PeakAnonKiB))
	out.Printf("  CPU per cluster: API server and etcd %s for the registration, %s per raw create (ratio %.2f), %s per raw create with one informer (ratio %.2f), %s per raw create after the deletion\n",
		perCluster(r.registration.servers, n), perCluster(r.rawCPU.servers, n), benchkit.Ratio(r.registration.servers, r.rawCPU.servers),
		perCluster(r.rawInformedCPU.servers, n), benchkit.Ratio(r.registration.servers, r.rawInformedCPU.servers), perCluster(r.rawAfterCPU.servers, n))
	out.Printf("  manager CPU: %s per registered cluster (%s until Ready), %s per renewed certificate, %s per idle minute (%s in %s); ready %s after its start\n",
		benchkit.Ms(r.managerPerCluster(n)), r10(r.registration.client), benchkit.Ms(r.managerPerCertificate(n)), benchkit.Ms(r.managerPerIdleMinute()),
		r.idleManagerCPU, r.idleFor.Round(time.Second), r10(r.synced))
	cores := runtime.NumCPU()
	out.Printf("  CPU (%d cores): raw writes %s+%s (servers+writer, %.2f cores busy), with one informer %s+%s (%.2f); registration %s+%s (servers+manager, %.2f cores busy; all busy would take %s, %.2f of the raw time); etcd %s, %s and %s (%s, %s, %s)\n",
		cores, r10(r.rawCPU.servers), r10(r.rawCPU.client), r.rawCPU.busy(), r10(r.rawInformedCPU.servers), r10(r.rawInformedCPU.client), r.rawInformedCPU.busy(),
		r10(r.registration.servers), r10(r.registration.client), r.registration.busy(), r10(r.registration.floor(cores)), benchkit.Ratio(r.registration.floor(cores), r.rawCPU.took),
		r10(r.rawCPU.etcd), r10(r.rawInformedCPU.etcd), r10(r.registration.etcd), r.rawCPU.compactionsSaid(), r.rawInformedCPU.compactionsSaid(), r.registration.compactionsSaid())
	out.Printf("  writes while converging: %s (writes per cluster count all but the %s); probes %.3f per cluster; writes stopped %s after Ready, %s in between\n",
		benchkit.Sorted(r.byResource), probeResource, r.probesPerCluster, r10(r.settle), benchkit.Sorted(r.settleWrites))
	if r.idleWrites > 0 {
		out.Printf("  idle writes: %s\n", benchkit.Sorted(r.idleWritten))
	}
	out.Printf("  one join: its cluster secret after %s, %d writes %s\n", r.join.Round(time.Millisecond), benchkit.Total(r.joinCalls), benchkit.Sorted(r.joinCalls))
	printWave(out, n, r)
	d := r.deletion
	out.Printf("  GitOpsCluster deletion: done in %s, the last cluster secret gone after %s; %d cluster secret(s) and %d ledger(s) left; %d certificates revoked; blocklist %d keys, %d of %d budget bytes, %d bytes stored (etcd's limit %d)\n",
		r10(d.took), r10(d.secretsGone), d.secretsLeft, d.ledgersLeft, d.revokedCerts, d.blocklistKeys, d.blocklistBytes, ledger.BlocklistBudget, d.blocklistStoredBytes, 1536*1024)
}

// printWave prints the renewal wave against the raw CSR paces.
func printWave(out *benchkit.Output, n int, r *result) {
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	before, after := r.rawCSR, r.rawCSRAfter
	out.Printf("  renewal wave: %d CSRs signed in %s (%.0f/s; the last created after %s, %d agents at a time); raw paces %.0f/s with 3 writes (wave %.2f of it), %.0f/s with 4 (wave %.2f of it), %.0f/s with 4 and the signer's informers (wave %.2f of it); once the wave's writes stopped %.0f/s, %.0f/s and %.0f/s (wave %.2f, %.2f and %.2f; the manager's CPU meanwhile %s)\n",
		n, r10(r.wave), rate(r.wave), r10(r.waveCreated), agentsInFlight,
		rate(before.three.took), benchkit.Ratio(before.three.took, r.wave), rate(before.four.took), benchkit.Ratio(before.four.took, r.wave),
		rate(before.fourInformed.took), benchkit.Ratio(before.fourInformed.took, r.wave),
		rate(after.three.took), rate(after.four.took), rate(after.fourInformed.took),
		benchkit.Ratio(after.three.took, r.wave), benchkit.Ratio(after.four.took, r.wave), benchkit.Ratio(after.fourInformed.took, r.wave), r10(r.rawAfterManagerCPU))
	out.Printf("  CPU per CSR: wave: API server and etcd %s, the manager %s, the agents and the benchmark's watch %s; raw 3 writes %s, 4 writes %s, 4 writes with informers %s (API server and etcd); etcd %s in the wave (%s)\n",
		perCluster(r.waveCPU.servers, n), perCluster(r.waveCPU.client, n), perCluster(r.waveAgentsCPU, n),
		perCluster(before.three.servers, n), perCluster(before.four.servers, n), perCluster(before.fourInformed.servers, n), r10(r.waveCPU.etcd), r.waveCPU.compactionsSaid())
	informed := before.fourInformed.cost
	out.Printf("  the wave's requests per CSR: reads %.2f %s, writes %.2f %s; watch events sent per CSR %.2f %s (the benchmark's own watch included), against %.2f %s with the raw signer's informers\n",
		benchkit.PerEach(benchkit.Total(r.waveCPU.cost.Reads()), n), benchkit.Sorted(r.waveCPU.cost.Reads()),
		benchkit.PerEach(benchkit.Total(r.waveCPU.cost.Writes()), n), benchkit.Sorted(r.waveCPU.cost.Writes()),
		benchkit.PerEach(benchkit.Total(r.waveCPU.cost.Events), n), benchkit.Sorted(r.waveCPU.cost.Events),
		benchkit.PerEach(benchkit.Total(informed.Events), n), benchkit.Sorted(informed.Events))
}

// printAccounting accounts for the API server's CPU per cluster in the registration against
// the raw writes with one informer: the requests each made, the watch events the API server
// sent and to how many watchers, how API Priority and Fairness classed the requests, and,
// with --profiles, its CPU by kind of work.
func printAccounting(out *benchkit.Output, n int, r *result) {
	prof := r.profiles
	reg, raw := r.registration.cost, r.rawInformedCPU.cost
	out.Printf("  accounting, registration against the raw writes with one informer, per cluster:\n")
	out.Printf("    API server %s against %s, etcd %s against %s\n", perCluster(reg.CPU[benchkit.APIServer], n), perCluster(raw.CPU[benchkit.APIServer], n),
		perCluster(reg.CPU[benchkit.Etcd], n), perCluster(raw.CPU[benchkit.Etcd], n))
	out.Printf("    requests: %.3f against %.3f; registration %s; raw %s\n", benchkit.PerEach(benchkit.Total(reg.Requests), n), benchkit.PerEach(benchkit.Total(raw.Requests), n),
		benchkit.Sorted(reg.Requests), benchkit.Sorted(raw.Requests))
	out.Printf("    watch events sent: %.3f against %.3f; registration %s; raw %s; Secret watchers at the end %d against %d (the API server keeps one itself)\n",
		benchkit.PerEach(benchkit.Total(reg.Events), n), benchkit.PerEach(benchkit.Total(raw.Events), n), benchkit.Sorted(reg.Events), benchkit.Sorted(raw.Events),
		reg.Watchers["secrets"], raw.Watchers["secrets"])
	out.Printf("    API Priority and Fairness, requests dispatched by flow schema/priority level: registration %s; raw %s (the benchmark's own polling and scrapes count under exempt/exempt)\n",
		benchkit.Sorted(reg.Flows), benchkit.Sorted(raw.Flows))
	out.Printf("    this benchmark's own during the registration: %d GETs of the GitOpsCluster (its polling), 2 scrapes of the API server's metrics and 2 of etcd's, %s of its CPU\n",
		reg.Requests["GET gitopsclusters"], r10(reg.CPU[benchkit.Bench]))
	if prof == "" {
		return
	}
	byKind := func(phase string, c benchkit.Cost) (map[string]time.Duration, error) {
		sums, total, err := benchkit.ProfileByKind(prof+phase+"-apiserver.pprof", benchkit.APIServerKinds)
		if err != nil || total == 0 {
			return nil, err
		}
		// The profile covers the phase's first seconds: its shares scale the phase's CPU.
		for k, v := range sums {
			sums[k] = time.Duration(float64(c.CPU[benchkit.APIServer]) * float64(v) / float64(total))
		}
		return sums, nil
	}
	regKinds, err1 := byKind("registration", reg)
	rawKinds, err2 := byKind("raw-writes-informed", raw)
	if err1 != nil || err2 != nil || regKinds == nil || rawKinds == nil {
		out.Printf("    no profile to account with: %v %v\n", err1, err2)
		return
	}
	out.Printf("    the API server's CPU by kind of work (each phase's profile of its first %d s, scaled to the phase's CPU), registration against raw:\n", profileSeconds)
	for _, k := range append(benchkit.APIServerKinds, benchkit.Kind{Name: "other"}) {
		a, b := regKinds[k.Name], rawKinds[k.Name]
		if a == 0 && b == 0 {
			continue
		}
		out.Printf("      %-52s %s against %s (%+.3f ms)\n", k.Name, perCluster(a, n), perCluster(b, n), float64(a-b)/float64(n)/float64(time.Millisecond))
	}
}
