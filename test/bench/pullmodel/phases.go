package main

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
)

// feedBack plays the work agents: each spoke Application is Synced and Healthy, lists a
// warning first (Argo CD sorts conditions by type) and, for every tenth, a SyncError after it,
// and carries the resource reporter's list of its objects; the phase ends when every hub
// Application shows it.
func (p *pullRun) feedBack() error {
	p.agent = &workAgent{c: p.c, last: map[string]map[string]string{}}
	p.spokes = make([]*spokeApp, p.nApps)
	for i := range p.spokes {
		p.spokes[i] = &spokeApp{sync: "Synced", health: "Healthy", reconciledAt: time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), syncError: i%10 == 0, resources: resourcesOf(i)}
	}
	var fed time.Duration
	c, err := p.phase(func() error {
		start := time.Now()
		if _, err := p.agent.report(p.ctx, p.spokes); err != nil {
			return err
		}
		fed = time.Since(start)
		return waitApps(p.ctx, p.c, p.nApps, "every hub Application Healthy, with its resources and its SyncError", func(i int, a *unstructured.Unstructured) bool {
			h, _, _ := unstructured.NestedString(a.Object, "status", "health", "status")
			res, _, _ := unstructured.NestedSlice(a.Object, "status", "resources")
			return h == "Healthy" && len(res) == len(p.spokes[i].resources) && hasCondition(a, "SyncError") == p.spokes[i].syncError
		})
	})
	if err != nil {
		return err
	}
	w := c.Writes()
	p.out.Printf("status:      feedback written in %s (benchmark's own %d ManifestWork status writes); every hub Application Healthy, with resources and errors, %s after the first; manager's Application writes %d = %.2f per Application; manager CPU %s per Application\n",
		fed.Round(10*time.Millisecond), w["manifestworks/status"], c.Took.Round(10*time.Millisecond), w["applications"], p.perApp(w["applications"]),
		benchkit.Ms(benchkit.PerUnit(c.CPU[benchkit.Manager], p.nApps)))
	return nil
}

// syncAll syncs every Application in RollingSync's order: the ApplicationSet asks (its request
// on the hub Application), the spoke runs it and records its end, the hub clears the request,
// then the spoke reconciles once more, and progressive sync reads that time.
func (p *pullRun) syncAll() error {
	c, err := p.phase(p.runSyncs)
	if err != nil {
		return err
	}
	w := c.Writes()
	p.out.Printf("sync:        %d RollingSync requests run and the reconcile after them shown in %s; per Application: %.2f ManifestWork writes, %.2f manager Application writes (besides the benchmark's own request), %.2f work-agent status writes; manager CPU %s per Application\n",
		p.nApps, c.Took.Round(10*time.Millisecond), p.perApp(w["manifestworks"]), p.perApp(w["applications"]-p.nApps), p.perApp(w["manifestworks/status"]),
		benchkit.Ms(benchkit.PerUnit(c.CPU[benchkit.Manager], p.nApps)))
	return nil
}

func (p *pullRun) runSyncs() error {
	if err := parallel(p.nApps, func(i int) error {
		app := pullmodel.NewApplication()
		app.SetNamespace(argoNS)
		app.SetName(appName(i))
		return p.c.Patch(p.ctx, app, client.RawPatch(types.MergePatchType, []byte(rollingSyncOperation)))
	}); err != nil {
		return err
	}
	if err := waitWorks(p.ctx, p.c, p.nApps, "every ManifestWork carrying the request", func(w *workv1.ManifestWork) bool {
		return propagation.Operation(w) != nil
	}); err != nil {
		return err
	}
	// Each spoke runs the request its ManifestWork hands it.
	works, err := listWorks(p.ctx, p.c)
	if err != nil {
		return err
	}
	for k := range works {
		if i, ok := appIndex(works[k].Annotations[pullmodel.AnnotationHubAppName]); ok && i < len(p.spokes) {
			p.spokes[i].ran = propagation.OperationAsSent(&works[k])
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, sp := range p.spokes {
		sp.opPhase, sp.opStarted, sp.opFinished = "Succeeded", now.Format(time.RFC3339), now.Add(time.Second).Format(time.RFC3339)
	}
	if _, err := p.agent.report(p.ctx, p.spokes); err != nil {
		return err
	}
	if err := waitApps(p.ctx, p.c, p.nApps, "every hub request cleared", func(_ int, a *unstructured.Unstructured) bool {
		_, op := a.Object["operation"]
		phase, _, _ := unstructured.NestedString(a.Object, "status", "operationState", "phase")
		return !op && phase == "Succeeded"
	}); err != nil {
		return err
	}
	reconciled := now.Add(3 * time.Second).Format(time.RFC3339)
	for _, sp := range p.spokes {
		sp.reconciledAt = reconciled
	}
	if err := p.waitReconcileShown(reconciled); err != nil {
		return err
	}
	// The work agents' status write for the ManifestWorks' last change (the reconcile time's
	// rule gone), as OCM's agent makes after a spec change.
	_, err = p.agent.report(p.ctx, p.spokes)
	return err
}

// waitReconcileShown reports the spoke's reconcile after the sync under the rules each
// ManifestWork has now, again until every hub Application shows it and no ManifestWork reads
// the reconcile time.
func (p *pullRun) waitReconcileShown(reconciled string) error {
	return waitFor("every hub Application showing the reconcile after its sync, and no ManifestWork reading the reconcile time", phaseTimeout, func() (bool, error) {
		if _, err := p.agent.report(p.ctx, p.spokes); err != nil {
			return false, err
		}
		works, err := listWorks(p.ctx, p.c)
		if err != nil {
			return false, err
		}
		for i := range works {
			if propagation.FeedsBackReconcileTime(&works[i]) {
				return false, nil
			}
		}
		apps := pullmodel.NewApplicationList()
		if err := p.c.List(p.ctx, apps, client.InNamespace(argoNS)); err != nil {
			return false, err
		}
		for _, a := range apps.Items {
			if at, _, _ := unstructured.NestedString(a.Object, "status", "reconciledAt"); at != reconciled {
				return false, nil
			}
		}
		return true, nil
	})
}

// refreshes simulates Argo CD's periodic refresh on every spoke for d: each spoke Argo CD
// refreshes each Application every period, and only the reconcile time changes. The work
// agents read each ManifestWork's rules anew every round. Every write is an idle write.
func (p *pullRun) refreshes(d, period time.Duration) error {
	agentWrites, rounds := 0, 0
	c, err := p.phase(func() error {
		for start := time.Now(); time.Since(start) < d; {
			at := time.Now().UTC().Format(time.RFC3339)
			for _, sp := range p.spokes {
				sp.reconciledAt = at
			}
			n, err := p.agent.report(p.ctx, p.spokes)
			if err != nil {
				return err
			}
			agentWrites, rounds = agentWrites+n, rounds+1
			time.Sleep(min(period, d-time.Since(start)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	w := c.Writes()
	perMinute := func(n int) float64 { return float64(n) / c.Took.Minutes() }
	refreshed := p.nApps * rounds
	p.out.Printf("refresh:     %s with each of the %d spoke Applications refreshed every %s (%d refreshes): work-agent status writes %.1f/min, hub Application writes %.1f/min, all writes %.1f/min %s\n",
		c.Took.Round(time.Second), p.nApps, period, refreshed, perMinute(agentWrites), perMinute(w["applications"]), perMinute(benchkit.Total(w)), benchkit.Sorted(w))
	p.out.Printf("             manager CPU %s in all, %s per Application per refresh; API server and etcd %s\n",
		c.CPU[benchkit.Manager].Round(10*time.Millisecond), benchkit.Ms(benchkit.PerUnit(c.CPU[benchkit.Manager], refreshed)), c.Servers().Round(10*time.Millisecond))
	p.out.Printf("hub writes at rest: %d (must be 0)\n", agentWrites+benchkit.Total(w))
	p.out.Printf("memory:      manager peak RSS %s (<= 256 MiB)\n", benchkit.MiB(p.memory().PeakKiB))
	if agentWrites+benchkit.Total(w) != 0 {
		return fmt.Errorf("the fleet at rest wrote %d times", agentWrites+benchkit.Total(w))
	}
	return nil
}
