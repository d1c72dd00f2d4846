package gitopscluster_test

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/revocation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// agentctl changes a principal's blocklist the way `argocd-agentctl blocklist tls add|remove
// <fingerprint>` of argocd-agent v0.10.0 does (cmd/ctl/blocklist.go, internal/blocklist/
// configmap.go): it reads the ConfigMap's keys, reads the ConfigMap a second time, sets its
// whole data to the keys of the first read plus (add) or minus (remove) the fingerprint as
// typed, and updates it with the second read's resourceVersion, or creates it when the second
// read found none. It never retries; a person runs it again. between, when set, runs between
// the two reads.
func agentctl(ctx context.Context, ns string, add bool, fp string, between func()) error {
	key := types.NamespacedName{Namespace: ns, Name: ledger.BlocklistName}
	keys := map[string]string{}
	cm := &corev1.ConfigMap{}
	switch err := k8s.Get(ctx, key, cm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		for k := range cm.Data {
			keys[k] = ""
		}
	}
	_, listed := keys[fp]
	if add == listed {
		return nil // "already in blocklist" / "not found in blocklist": no write
	}
	if add {
		keys[fp] = ""
	} else {
		delete(keys, fp)
	}
	if between != nil {
		between()
	}
	cm = &corev1.ConfigMap{}
	if err := k8s.Get(ctx, key, cm); apierrors.IsNotFound(err) {
		return k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ledger.BlocklistName}, Data: keys})
	} else if err != nil {
		return err
	}
	cm.Data = keys
	return k8s.Update(ctx, cm)
}

// personKey is a fingerprint a person blocks by hand (of no certificate of these tests).
func personKey(i int) string {
	return fmt.Sprintf("%X", sha256.Sum256(fmt.Appendf(nil, "a person's key %d", i)))
}

// blocklistKeys reads the blocklist live; nil when there is none.
func blocklistKeys(t *testing.T, ns string) map[string]string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ledger.BlocklistName}, cm); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	if cm.Data == nil {
		return map[string]string{}
	}
	return cm.Data
}

// lacking lists the keys of want the blocklist does not hold.
func lacking(t *testing.T, ns string, want ...string) []string {
	t.Helper()
	have := blocklistKeys(t, ns)
	var out []string
	for _, k := range want {
		if _, ok := have[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// backWithin fails t unless every key of want is on the blocklist within d, and logs how long
// it took.
func backWithin(t *testing.T, ns, what string, d time.Duration, want ...string) {
	t.Helper()
	start := time.Now()
	err := poll.Wait(context.Background(), d, func(context.Context) (bool, string) {
		if l := lacking(t, ns, want...); len(l) > 0 {
			return false, fmt.Sprintf("%d key(s) missing", len(l))
		}
		return true, ""
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond))
}

// blocklistEvents counts the Events of reason on the principal's blocklist, and returns the
// last one's note.
func blocklistEvents(t *testing.T, ns, reason string) (int, string) {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n, note := 0, ""
	for _, e := range list.Items {
		if e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == ledger.BlocklistName && e.Reason == reason {
			n++
			note = e.Note
		}
	}
	return n, note
}

// revoke creates the AgentRevocation of cluster and waits for it to be enforced.
func (f *revocationFixture) revoke(cluster string) {
	f.t.Helper()
	if err := f.tryRevoke(context.Background(), cluster); err != nil {
		f.t.Fatal(err)
	}
}

// tryRevoke is revoke returning its failure instead, for goroutines other than the test's
// (only the test goroutine may end a test).
func (f *revocationFixture) tryRevoke(ctx context.Context, cluster string) error {
	if err := k8s.Create(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: cluster},
		Spec: v1alpha1.AgentRevocationSpec{Reason: "test"}}); err != nil {
		return fmt.Errorf("creating the AgentRevocation of %s: %w", cluster, err)
	}
	err := poll.Wait(ctx, 30*time.Second, func(ctx context.Context) (bool, string) {
		rev := &v1alpha1.AgentRevocation{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: cluster}, rev); err != nil {
			return false, err.Error()
		}
		if !meta.IsStatusConditionTrue(rev.Status.Conditions, v1alpha1.ConditionEnforced) {
			return false, fmt.Sprintf("status %+v", rev.Status)
		}
		return true, ""
	})
	if err != nil {
		return fmt.Errorf("the AgentRevocation of %s enforced: %w", cluster, err)
	}
	return nil
}

func (f *revocationFixture) key(cluster string) string { return pki.Fingerprint(f.certs[cluster]) }

// quiet waits until the blocklist has not changed for d.
func quiet(t *testing.T, ns string, d time.Duration) {
	t.Helper()
	rv, since := "", time.Now()
	eventually(t, "the blocklist quiet for "+d.String(), func() error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ledger.BlocklistName}, cm); client.IgnoreNotFound(err) != nil {
			return err
		}
		if cm.ResourceVersion != rv {
			rv, since = cm.ResourceVersion, time.Now()
		}
		if time.Since(since) < d {
			return fmt.Errorf("changed %s ago", time.Since(since).Round(time.Millisecond))
		}
		return nil
	})
}

// TestBlocklistSharedWithCLI: a person who edits the principal's blocklist with argocd-agentctl
// (which rewrites the ConfigMap's whole data from a read taken before the one its update is
// conditional on, and never retries) and the manager never drop each other's keys for good.
// The person's keys survive every manager write, whatever the interleaving; a manager key the
// person's write drops (by `remove`, by the CLI's two reads straddling a manager write, or by
// deleting the ConfigMap) is back at once, not after the keeper's wait for a revocation on its
// way, so a revoked agent gets no window to reconnect; a key the principal cannot match is
// reported.
func TestBlocklistSharedWithCLI(t *testing.T) {
	ctx := context.Background()
	// The keeper's wait for a revocation on its way, far beyond restoreTimeout: a dropped key
	// back within restoreTimeout came back at once, by the keeper's memory of listed keys, and
	// a slow machine only makes it take longer, never pass by the wait.
	t.Cleanup(revocation.SetBlocklistSecondLookForTest(10 * time.Minute))
	const restoreTimeout = 30 * time.Second
	clusters := []string{"cli-a", "cli-b", "cli-c", "cli-d", "cli-e", "cli-f", "cli-g", "cli-h"}
	f := newRevocationFixture(t, "cli-shared")
	f.selectAll(clusters...)
	f.issue("g", clusters...)

	// A person's key before the manager ever wrote the blocklist: agentctl creates it.
	if err := agentctl(ctx, f.ns, true, personKey(0), nil); err != nil {
		t.Fatal(err)
	}
	f.revoke("cli-a")
	f.waitRevoked("cli-a")
	if l := lacking(t, f.ns, personKey(0)); len(l) > 0 {
		t.Fatalf("the manager's first write dropped the person's key")
	}

	// One person adds keys back to back, running the command again whenever it fails, while
	// the manager revokes three clusters.
	const added = 30
	people := []string{personKey(0)}
	for i := 1; i <= added; i++ {
		people = append(people, personKey(i))
	}
	// Each goroutine sends exactly one result; the test waits for all of them before it
	// judges, so none outlives it.
	raced := []string{"cli-b", "cli-c", "cli-d"}
	results := make(chan error, 1+len(raced))
	refused := 0
	go func() {
		for _, fp := range people[1:] {
			var err error
			for attempt := 0; attempt < 50; attempt++ {
				if err = agentctl(ctx, f.ns, true, fp, nil); err == nil {
					break
				}
				refused++
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				results <- fmt.Errorf("adding %s: %w", fp, err)
				return
			}
		}
		results <- nil
	}()
	for i, c := range raced {
		go func() {
			time.Sleep(time.Duration(i) * 80 * time.Millisecond)
			results <- f.tryRevoke(ctx, c)
		}()
	}
	for range 1 + len(raced) {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, c := range []string{"cli-b", "cli-c", "cli-d"} {
		f.waitRevoked(c)
	}
	t.Logf("the person's commands refused on a conflict with the manager, and run again: %d", refused)
	manager := []string{f.key("cli-a"), f.key("cli-b"), f.key("cli-c"), f.key("cli-d")}
	backWithin(t, f.ns, "after the race, every key of both", restoreTimeout, append(slices.Clone(people), manager...)...)

	// The CLI's two reads straddle a manager write: its update, conditional on the second
	// read only, rewrites data from the first and drops the manager's new key.
	quiet(t, f.ns, time.Second)
	err := agentctl(ctx, f.ns, true, personKey(added+1), func() {
		f.revoke("cli-e")
		f.waitRevoked("cli-e")
		quiet(t, f.ns, time.Second)
	})
	if err != nil {
		t.Fatalf("the CLI's update: %v", err)
	}
	people = append(people, personKey(added+1))
	manager = append(manager, f.key("cli-e"))
	backWithin(t, f.ns, "cli-e's key dropped by the CLI's write back", restoreTimeout, f.key("cli-e"))
	if l := lacking(t, f.ns, people...); len(l) > 0 {
		t.Fatalf("putting cli-e back dropped a person's key")
	}

	// A person removes a manager key: it comes back, with a Warning.
	quiet(t, f.ns, time.Second)
	restoredBefore, _ := blocklistEvents(t, f.ns, "BlocklistRestored")
	if err := agentctl(ctx, f.ns, false, f.key("cli-b"), nil); err != nil {
		t.Fatal(err)
	}
	backWithin(t, f.ns, "cli-b's key removed with the CLI back", restoreTimeout, f.key("cli-b"))
	eventually(t, "a BlocklistRestored Event", func() error {
		if n, _ := blocklistEvents(t, f.ns, "BlocklistRestored"); n <= restoredBefore {
			return fmt.Errorf("none new")
		}
		return nil
	})

	// Lifting a revocation unblocks nothing: a person's key for the same certificate (`add`
	// finds it listed and writes nothing) and the manager's stay until the certificate expires.
	if err := agentctl(ctx, f.ns, true, f.key("cli-c"), nil); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cli-c"}}); err != nil {
		t.Fatal(err)
	}
	f.waitSecrets("cli-c")
	if l := lacking(t, f.ns, f.key("cli-c")); len(l) > 0 {
		t.Fatalf("lifting the revocation of cli-c unblocked its revoked certificate")
	}

	// Keys the principal cannot match (it compares 64 upper-case hex characters exactly):
	// lower case is stored as typed and reported; a colon is no ConfigMap key, so the API
	// server refuses the CLI's write.
	quiet(t, f.ns, time.Second)
	lower := strings.ToLower(f.key("cli-f"))
	if err := agentctl(ctx, f.ns, true, lower, nil); err != nil {
		t.Fatal(err)
	}
	// Not fatal: the ConfigMap's deletion below is checked whatever this finds.
	if err := poll.Wait(ctx, 10*time.Second, func(context.Context) (bool, string) {
		n, note := blocklistEvents(t, f.ns, "BlocklistKeyMalformed")
		if n == 0 {
			return false, "none"
		}
		if !strings.Contains(note, lower) || !strings.Contains(note, f.key("cli-f")) {
			return false, "the note does not name the key and its upper-case form: " + note
		}
		return true, ""
	}); err != nil {
		t.Errorf("a BlocklistKeyMalformed Event naming the lower-case key: %v", err)
	}
	var colons []string
	for i := 0; i < len(f.key("cli-g")); i += 2 {
		colons = append(colons, f.key("cli-g")[i:i+2])
	}
	if err := agentctl(ctx, f.ns, true, strings.Join(colons, ":"), nil); !apierrors.IsInvalid(err) {
		t.Errorf("a colon-separated key: %v, want the API server to refuse it", err)
	}
	// Reported once, not at every change of the blocklist; the manager leaves the key alone.
	if err := agentctl(ctx, f.ns, true, personKey(added+2), nil); err != nil {
		t.Fatal(err)
	}
	people = append(people, personKey(added+2))
	quiet(t, f.ns, time.Second)
	if n, _ := blocklistEvents(t, f.ns, "BlocklistKeyMalformed"); n != 1 {
		t.Errorf("%d BlocklistKeyMalformed Events, want 1", n)
	}
	if l := lacking(t, f.ns, append(slices.Clone(people), lower)...); len(l) > 0 {
		t.Errorf("the manager dropped a person's key: %v", l)
	}

	// The ConfigMap deleted: the principal's blocklist is empty until it is back. The manager
	// creates it again with its own keys at once; the person's keys are gone with it.
	if err := k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: ledger.BlocklistName}}); err != nil {
		t.Fatal(err)
	}
	backWithin(t, f.ns, "the deleted blocklist back with the manager's keys", restoreTimeout, manager...)
	if l := lacking(t, f.ns, people...); len(l) != len(people) {
		t.Errorf("the re-created blocklist holds %d of the person's keys; the manager knows only its own", len(people)-len(l))
	}
}

var measureTimeToBlocklist = flag.Bool("gitopscluster.time-to-blocklist", false, "run TestRevocationTimeToBlocklist, the measurement of a revocation's time to the blocklist that docs/pki.md quotes")

// TestRevocationTimeToBlocklist measures the manager's part of a revocation's way to a v0.10
// principal: from an AgentRevocation's creation, and from a cluster's departure from its
// Placement (which waits for the settle period, departureSettle here), to the write of the
// blocklist ConfigMap that holds its certificate, as a watch on the ConfigMap (what the
// principal's informer runs) sees it. Some 30 s for figures that docs/pki.md quotes, not a
// check: it runs only when asked for.
func TestRevocationTimeToBlocklist(t *testing.T) {
	if !*measureTimeToBlocklist {
		t.Skip("a measurement; run with -gitopscluster.time-to-blocklist")
	}
	ctx := context.Background()
	const n = 5
	var clusters []string
	// Two more that stay: the last departure must not be the whole fleet.
	for i := range 2*n + 2 {
		clusters = append(clusters, fmt.Sprintf("tt-%d", i))
	}
	f := newRevocationFixture(t, "time-to-block")
	f.selectAll(clusters...)
	f.issue("g", clusters...)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// until waits on a watch of the blocklist for a version holding fp, and returns when.
	until := func(fp string, act func()) time.Duration {
		t.Helper()
		w, err := wc.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(f.ns),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", ledger.BlocklistName)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		start := time.Now()
		act()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case ev := <-w.ResultChan():
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted {
					if _, ok := cm.Data[fp]; ok {
						return time.Since(start)
					}
				}
			case <-timeout:
				t.Fatalf("%s not blocked within 30s", fp)
			}
		}
	}
	summary := func(what string, ds []time.Duration) {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		t.Logf("%s: min %s, median %s, max %s (%d runs)", what, ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), len(ds))
	}

	var byRevocation []time.Duration
	for _, c := range clusters[:n] {
		byRevocation = append(byRevocation, until(f.key(c), func() {
			if err := k8s.Create(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: c}}); err != nil {
				t.Fatal(err)
			}
		}))
		quiet(t, f.ns, 500*time.Millisecond)
	}
	summary("AgentRevocation created -> blocklist written", byRevocation)

	var byDeparture []time.Duration
	// The revoked ones stay selected: leaving with them, the first departure would be more
	// than half of the fleet and wait for a person.
	stay := slices.Clone(clusters)
	for _, c := range clusters[n : 2*n] {
		stay = slices.DeleteFunc(stay, func(s string) bool { return s == c })
		byDeparture = append(byDeparture, until(f.key(c), func() { setDecisions(t, f.ns, "p", 0, stay...) }))
		// The next departure is a wave of its own, under the circuit breaker.
		time.Sleep(departureSettle + time.Second)
	}
	summary(fmt.Sprintf("cluster out of its Placement -> blocklist written (settle period %s)", departureSettle), byDeparture)
	for _, d := range byDeparture {
		if d < departureSettle {
			t.Errorf("a departure was revoked after %s, before the settle period %s", d, departureSettle)
		}
	}
}
