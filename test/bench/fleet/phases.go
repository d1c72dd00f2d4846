package main

import (
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// settle counts the registration's writes 2 s after Ready (the reconcile that wrote Ready
// finished), then waits until the writes stop: a new fleet's one-time work after Ready (the
// components' probes) is not idle churn, and the idle window, the join and the wave are
// measured after it.
func (b *fleetRun) settle(before reading, start time.Time) error {
	time.Sleep(2 * time.Second)
	converged, err := b.read()
	if err != nil {
		return err
	}
	byResource := converged.Since(before.Reading).Writes()
	// The benchmark's own GitOpsCluster create is not the manager's.
	if byResource["gitopsclusters"]--; byResource["gitopsclusters"] == 0 {
		delete(byResource, "gitopsclusters")
	}
	b.r.byResource = byResource
	b.r.writesPerCluster = benchkit.PerEach(benchkit.Total(byResource)-byResource[probeResource], b.n)
	from, err := testenv.APIWrites(b.ctx, b.env.Config)
	if err != nil {
		return err
	}
	settled, settledAt, err := waitForQuiet(b.ctx, b.env, from, "Ready")
	if err != nil {
		return err
	}
	b.r.settleWrites = testenv.DiffWrites(from, settled)
	b.r.probesPerCluster = benchkit.PerEach(byResource[probeResource]+b.r.settleWrites[probeResource], b.n)
	b.r.settle = settledAt.Sub(start) - b.r.ready
	logf("N=%d: writes stopped %s after Ready", b.n, b.r.settle.Round(10*time.Millisecond))
	return nil
}

// idle watches the settled fleet: every write is an idle write, and the manager's CPU is what
// an idle fleet costs.
func (b *fleetRun) idle(d time.Duration) error {
	logf("N=%d: watching the idle fleet for %s...", b.n, d)
	before, err := b.read()
	if err != nil {
		return err
	}
	time.Sleep(d)
	after, err := b.read()
	if err != nil {
		return err
	}
	c := after.Since(before.Reading)
	b.r.idleWrites, b.r.idleWritten = benchkit.Total(c.Writes()), c.Writes()
	b.r.idleManagerCPU, b.r.idleFor = c.CPU[benchkit.Manager], c.Took
	return nil
}

func (b *fleetRun) join() error {
	var err error
	b.r.join, b.r.joinCalls, err = joinOne(b.ctx, b.env, b.n)
	return err
}

// wave times the renewal wave, then the raw CSR paces again once its writes have stopped, in
// the state the wave ran in: the fleet's objects in the API server's cache and the manager's
// watches open. The manager never sees the raw requests (its CSR cache selects its own signer
// on the server) nor the raw ledgers (another managed-by label, in a namespace it does not
// watch); its CPU meanwhile is printed.
func (b *fleetRun) wave() error {
	logf("N=%d: renewal wave of %d CSRs...", b.n, b.n)
	b.prof.phase("wave")
	before, err := b.read()
	if err != nil {
		return err
	}
	wave, created, err := renewalWave(b.ctx, b.env, b.agents, b.clusters)
	if err != nil {
		return err
	}
	after, err := b.read()
	if err != nil {
		return err
	}
	b.r.wave, b.r.waveCreated = wave, created
	b.r.waveCPU = after.share(before, benchkit.Manager, wave)
	b.r.waveAgentsCPU = b.r.waveCPU.cost.CPU[benchkit.Bench]
	from, err := testenv.APIWrites(b.ctx, b.env.Config)
	if err != nil {
		return err
	}
	if _, _, err := waitForQuiet(b.ctx, b.env, from, "the wave"); err != nil {
		return err
	}
	logf("N=%d: the raw CSR paces again, the fleet in place...", b.n)
	if b.r.rawCSRAfter, err = b.rawCSRPaces("-after"); err != nil {
		return err
	}
	for _, p := range []cpuShare{b.r.rawCSRAfter.three, b.r.rawCSRAfter.four, b.r.rawCSRAfter.fourInformed} {
		b.r.rawAfterManagerCPU += p.cost.CPU[benchkit.Manager]
	}
	return nil
}

// deleteAndRawAgain deletes the GitOpsCluster, then measures the raw writes once more, the
// fleet gone: the machine's pace drifts between runs by more than the ratio's margin, and the
// two raw figures say how far it moved within this one.
func (b *fleetRun) deleteAndRawAgain() error {
	logf("N=%d: deleting the GitOpsCluster...", b.n)
	var err error
	if b.r.deletion, err = deleteFleet(b.ctx, b.env); err != nil {
		return err
	}
	logf("N=%d: the raw writes again...", b.n)
	if b.r.rawAfterCPU, err = b.rawWritesPhase("raw-writes-after", "raw-cluster-secrets-after", false); err != nil {
		return err
	}
	// The sampler's last readings (the wave's and the deletion's peak) are in.
	b.r.memory = b.memory()
	return nil
}
