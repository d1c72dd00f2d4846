package gitopscluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// ocmPageSize is how many clusters OCM's placement controller writes in one PlacementDecision.
const ocmPageSize = 100

// pagesOf splits sorted cluster names into OCM's pages.
func pagesOf(clusters []string) [][]string {
	return slices.Collect(slices.Chunk(clusters, ocmPageSize))
}

// pagedFleet is a GitOpsCluster g whose Placement p selects n clusters named prefix-NNN, in
// OCM's pages of 100 sorted by name, with a certificate recorded for each agent. The manager
// writes every probe of the fleet in one pass, so that the passes the test observes are those
// the decisions wake.
func pagedFleet(t *testing.T, ns, prefix string, n int) (*revocationFixture, []string) {
	t.Helper()
	stopManager()
	startManagerWith(func(o *manager.Options) { o.Fleet.ProbesPerPass = n })
	t.Cleanup(func() { stopManager(); startManager() })
	f := newRevocationFixture(t, ns)
	var clusters []string
	for i := range n {
		clusters = append(clusters, fmt.Sprintf("%s-%03d", prefix, i))
	}
	createManagedClusters(t, clusters...)
	createPlacement(t, ns, "p")
	for i, page := range pagesOf(clusters) {
		setDecisions(t, ns, "p", i, page...)
	}
	createGitOpsCluster(t, ns, "g", "p", withAddress("principal.example.com"))
	f.waitSecretCount(n)
	f.issue("g", clusters...)
	return f, clusters
}

// waitSecretCount waits until the principal namespace holds n agent cluster secrets.
func (f *revocationFixture) waitSecretCount(n int) {
	f.t.Helper()
	eventually(f.t, fmt.Sprintf("%d cluster secrets", n), func() error {
		if got := len(f.registered()); got != n {
			return fmt.Errorf("%d cluster secrets", got)
		}
		return nil
	})
}

// registered lists the clusters that have a cluster secret not being deleted.
func (f *revocationFixture) registered() map[string]bool {
	f.t.Helper()
	var secrets corev1.SecretList
	if err := k8s.List(context.Background(), &secrets, client.InNamespace(f.ns), client.HasLabels{v1alpha1.LabelAgentName}); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range secrets.Items {
		if s.DeletionTimestamp.IsZero() {
			out[s.Labels[v1alpha1.LabelAgentName]] = true
		}
	}
	return out
}

// revokedAmong returns the clusters whose agent lost its cluster secret or has its recorded
// certificate on the blocklist.
func (f *revocationFixture) revokedAmong(clusters []string) []string {
	f.t.Helper()
	bl, err := f.store().Blocklist(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	reg := f.registered()
	var out []string
	for _, c := range clusters {
		if _, blocked := bl[pki.Fingerprint(f.certs[c])]; blocked || !reg[c] {
			out = append(out, c)
		}
	}
	return out
}

// watchNoRevocation checks, until the returned function is called, that none of clusters is
// revoked; the function fails the test with what was seen.
func (f *revocationFixture) watchNoRevocation(clusters []string) (stop func()) {
	f.t.Helper()
	done, finished := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var seen []string
	go func() {
		defer close(finished)
		for {
			bl, err := f.store().Blocklist(context.Background())
			var secrets corev1.SecretList
			if err == nil {
				err = k8s.List(context.Background(), &secrets, client.InNamespace(f.ns), client.HasLabels{v1alpha1.LabelAgentName})
			}
			if err == nil {
				reg := map[string]bool{}
				for _, s := range secrets.Items {
					reg[s.Labels[v1alpha1.LabelAgentName]] = s.DeletionTimestamp.IsZero()
				}
				var revoked []string
				for _, c := range clusters {
					if _, blocked := bl[pki.Fingerprint(f.certs[c])]; blocked || !reg[c] {
						revoked = append(revoked, c)
					}
				}
				if len(revoked) > 0 {
					mu.Lock()
					seen = append(seen, fmt.Sprintf("%s: %d revoked (%s)", time.Now().Format("15:04:05.000"), len(revoked), summarize(revoked)))
					mu.Unlock()
				}
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() {
		f.t.Helper()
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		if len(seen) > 0 {
			f.t.Fatalf("agents revoked although they must not be: %s", strings.Join(seen[:min(len(seen), 3)], "; "))
		}
	}
}

func summarize(items []string) string {
	if len(items) <= 3 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s ... %s", strings.Join(items[:3], ", "), items[len(items)-1])
}

// departureEvents returns the notes of the AgentRevoked Events that say agents left g's
// selection.
func departureEvents(t *testing.T, ns string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == "AgentRevoked" && strings.Contains(e.Note, "left the selection") {
			out = append(out, e.Note)
		}
	}
	return out
}

func approve(t *testing.T, ns, name string, count int) {
	t.Helper()
	g := getGOC(t, ns, name)
	patch := client.MergeFrom(g.DeepCopy())
	if g.Annotations == nil {
		g.Annotations = map[string]string{}
	}
	g.Annotations[v1alpha1.AnnotationApproveRevocation] = fmt.Sprint(count)
	if err := k8s.Patch(context.Background(), g, patch); err != nil {
		t.Fatal(err)
	}
}

// TestPagedMassDepartureTripsTheBreaker: 199 of 249 clusters leave and OCM rewrites the
// decisions as it does, one page per write, a second apart: page 0 takes the 50 that stay,
// pages 1 and 2 are emptied. The departures of the first page ripen a second before those of
// the second, and each page alone is under the circuit breaker's half; together they are a mass
// departure, which waits for a person and is revoked at once when approved.
func TestPagedMassDepartureTripsTheBreaker(t *testing.T) {
	f, clusters := pagedFleet(t, "paged-mass", "pm", 249)
	leaving, staying := clusters[:199], clusters[199:]

	stop := f.watchNoRevocation(clusters)
	setDecisions(t, f.ns, "p", 0, staying...)
	time.Sleep(time.Second)
	setDecisions(t, f.ns, "p", 1)
	time.Sleep(time.Second)
	setDecisions(t, f.ns, "p", 2)
	time.Sleep(3 * departureSettle)
	stop()
	g := conditionIs(t, f.ns, "g", v1alpha1.ConditionRevocationPaused, metav1.ConditionTrue, v1alpha1.ReasonTooManyDepartures)
	c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionRevocationPaused)
	if c.Reason != v1alpha1.ReasonTooManyDepartures || !strings.Contains(c.Message, "199 of 249") {
		t.Fatalf("RevocationPaused %s: %s; want the 199 departures of 249 agents", c.Reason, c.Message)
	}
	if g.Status.PendingDepartures != 199 {
		t.Errorf("pendingDepartures = %d, want 199", g.Status.PendingDepartures)
	}

	approve(t, f.ns, "g", 199)
	eventually(t, "the 199 departures revoked", func() error {
		if got := f.revokedAmong(leaving); len(got) != len(leaving) {
			return fmt.Errorf("%d of %d revoked", len(got), len(leaving))
		}
		return nil
	})
	if got := f.revokedAmong(staying); len(got) > 0 {
		t.Errorf("clusters still selected were revoked: %v", got)
	}
	conditionIs(t, f.ns, "g", v1alpha1.ConditionRevocationPaused, metav1.ConditionFalse, v1alpha1.ReasonRevocationAllowed)
	eventually(t, "the approval taken back once used", func() error {
		if v, ok := getGOC(t, f.ns, "g").Annotations[v1alpha1.AnnotationApproveRevocation]; ok {
			return fmt.Errorf("annotation still %q", v)
		}
		return nil
	})
}

// TestDeparturesCountTogetherWithinTheSettlePeriod: departures that start within the settle
// period of an earlier revocation belong to the same wave. 4 of 10 clusters leave and are
// revoked (under half); 2 more leave right after: 6 of the 10 agents left, which asks for a
// person. Once approved, a departure after a quiet settle period is judged on its own again.
func TestDeparturesCountTogetherWithinTheSettlePeriod(t *testing.T) {
	f := newRevocationFixture(t, "wave")
	var clusters []string
	for i := range 10 {
		clusters = append(clusters, fmt.Sprintf("wv-%02d", i))
	}
	f.selectAll(clusters...)
	f.issue("g", clusters...)

	setDecisions(t, f.ns, "p", 0, clusters[4:]...)
	for _, c := range clusters[:4] {
		f.waitRevoked(c)
	}
	setDecisions(t, f.ns, "p", 0, clusters[6:]...)
	g := conditionIs(t, f.ns, "g", v1alpha1.ConditionRevocationPaused, metav1.ConditionTrue, v1alpha1.ReasonTooManyDepartures)
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionRevocationPaused); !strings.Contains(c.Message, "6 of 10") {
		t.Errorf("RevocationPaused says %q; want the wave's 6 of 10 agents", c.Message)
	}
	f.neverRevoked(2*departureSettle, clusters[4], clusters[5])

	approve(t, f.ns, "g", 6)
	f.waitRevoked(clusters[4])
	f.waitRevoked(clusters[5])
	conditionIs(t, f.ns, "g", v1alpha1.ConditionRevocationPaused, metav1.ConditionFalse, v1alpha1.ReasonRevocationAllowed)

	// A quiet settle period later, one departure of the 4 agents left is its own wave.
	time.Sleep(departureSettle + time.Second)
	setDecisions(t, f.ns, "p", 0, clusters[7:]...)
	f.waitRevoked(clusters[6])
	if len(departureEvents(t, f.ns)) == 0 {
		t.Error("no AgentRevoked Event for the departures")
	}
}

// TestRecreatedDecisionPagesAreNoDeparture: the decisions of a 249-cluster Placement go, one
// page every half second (the last first), and come back a while later, one page a second as OCM
// writes them. Passes saw the last pages missing before the decisions were all gone; that must
// not make their clusters departures that have waited out the settle period when the first
// page is back: nothing is revoked, no Event says an agent left.
func TestRecreatedDecisionPagesAreNoDeparture(t *testing.T) {
	ctx := context.Background()
	f, clusters := pagedFleet(t, "recreated", "rc", 249)
	pages := pagesOf(clusters)

	stop := f.watchNoRevocation(clusters)
	for i := len(pages) - 1; i >= 0; i-- {
		if err := k8s.Delete(ctx, &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("p-decision-%d", i)}}); err != nil {
			t.Fatal(err)
		}
		if i == len(pages)-1 {
			eventually(t, "the last page's departures seen", func() error {
				if n := getGOC(t, f.ns, "g").Status.PendingDepartures; n != int32(len(pages[i])) {
					return fmt.Errorf("pendingDepartures = %d", n)
				}
				return nil
			})
		}
		time.Sleep(time.Second / 2)
	}
	conditionIs(t, f.ns, "g", v1alpha1.ConditionRevocationPaused, metav1.ConditionTrue, v1alpha1.ReasonSelectionUnknown)
	time.Sleep(2 * departureSettle)

	for i, page := range pages {
		setDecisions(t, f.ns, "p", i, page...)
		time.Sleep(time.Second)
	}
	eventually(t, "every cluster selected again", func() error {
		if n := getGOC(t, f.ns, "g").Status.PendingDepartures; n != 0 {
			return fmt.Errorf("pendingDepartures = %d", n)
		}
		return nil
	})
	time.Sleep(2 * departureSettle)
	stop()
	if ev := departureEvents(t, f.ns); len(ev) > 0 {
		t.Fatalf("Events say agents left: %v", ev)
	}
}
