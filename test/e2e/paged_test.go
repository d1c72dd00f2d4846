package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// pagedFleetBefore clusters sort before cluster1 and cluster2 and fill page 0 up to them, so
// that every early-sorting join pushes a real cluster from page 0 to page 1 (OCM writes pages
// of 100, sorted by name, one call per page).
const (
	pagedFleetBefore = 98
	pagedFleetAfter  = 150
	pagedFleetJoins  = 6
)

// Scenario: a 250-cluster selection (248 ManagedClusters without a klusterlet, plus the two
// real clusters) grows by clusters whose names shift every page, while the real agents keep
// their certificates; then shrinking it back trips the circuit breaker until approved.
func (s *suite) scenarioPagedFleet(t *testing.T) {
	ctx := ctxFor(t)
	var fake []string
	for i := range pagedFleetBefore {
		fake = append(fake, fmt.Sprintf("a-%03d", i))
	}
	for i := range pagedFleetAfter {
		fake = append(fake, fmt.Sprintf("z-%03d", i))
	}
	var joins []string
	for i := range pagedFleetJoins {
		joins = append(joins, fmt.Sprintf("a-%03d", pagedFleetBefore+i))
	}
	for _, c := range append(append([]string(nil), fake...), joins...) {
		mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: c, Labels: map[string]string{
			clusterv1beta2.ClusterSetLabel: "fleet", selectLabel: c,
		}}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
		if err := s.hub.Create(ctx, mc); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, c := range append(fake, joins...) {
			_ = s.hub.Delete(context.Background(), &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: c}})
		}
	}()
	real := map[string]string{}
	for _, c := range []string{"cluster1", "cluster2"} {
		cert, _, err := s.clientCert(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		real[c] = pki.Fingerprint(cert)
	}

	selected := append([]string{"cluster1", "cluster2"}, fake...)
	start := time.Now()
	s.setPlacementTolerant(t, selected...)
	s.waitClusterSecrets(t, len(selected))
	t.Logf("%d clusters selected and registered in %s", len(selected), time.Since(start).Round(100*time.Millisecond))
	blocked0, err := s.blocklist(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Watch, for the whole join phase, that no selected agent loses anything.
	var mu sync.Mutex
	var violations []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			bl, err := s.blocklist(context.Background())
			if err != nil {
				continue
			}
			mu.Lock()
			for c, fp := range real {
				if _, ok := bl[fp]; ok {
					violations = append(violations, c+"'s certificate was blocked")
				}
				if err := s.hub.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: agentsecret.Name(c)}, &corev1.Secret{}); err != nil {
					violations = append(violations, fmt.Sprintf("%s's cluster secret: %v", c, err))
				}
			}
			if len(bl) != len(blocked0) {
				violations = append(violations, fmt.Sprintf("the blocklist changed size: %d -> %d", len(blocked0), len(bl)))
			}
			mu.Unlock()
		}
	}()
	for _, j := range joins {
		selected = append(selected, j)
		s.setPlacementTolerant(t, selected...)
		pages, err := s.pageOf(ctx, "cluster1", "cluster2")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s joined: cluster1 on page %d, cluster2 on page %d", j, pages["cluster1"], pages["cluster2"])
	}
	s.waitClusterSecrets(t, len(selected))
	time.Sleep(2 * managerDepartureSettle)
	close(stop)
	<-done
	if len(violations) > 0 {
		t.Fatalf("selected agents were revoked while clusters joined: %v", violations[:min(len(violations), 5)])
	}

	// Back to the two real clusters: 256 of 258 agents would go at once.
	s.setPlacement(t, "cluster1", "cluster2")
	g := s.waitCondition(t, v1alpha1.ConditionRevocationPaused, v1alpha1.ReasonTooManyDepartures)
	if n, _ := s.countClusterSecrets(ctx); n != len(selected) {
		t.Errorf("the circuit breaker let %d cluster secrets go", len(selected)-n)
	}
	count := strconv.Itoa(int(g.Status.PendingDepartures))
	t.Logf("circuit breaker: %s", meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionRevocationPaused).Message)
	patch := client.MergeFrom(g.DeepCopy())
	if g.Annotations == nil {
		g.Annotations = map[string]string{}
	}
	g.Annotations[v1alpha1.AnnotationApproveRevocation] = count
	if err := s.hub.Patch(ctx, g, patch); err != nil {
		t.Fatal(err)
	}
	s.waitClusterSecrets(t, 2)
	s.waitReady(t, 2, 2)
	for c, fp := range real {
		if bl, _ := s.blocklist(ctx); hasKey(bl, fp) {
			t.Errorf("%s blocked", c)
		}
	}
	// Leave no approval behind for a later pass.
	g, err = s.goc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(g.DeepCopy())
	delete(g.Annotations, v1alpha1.AnnotationApproveRevocation)
	if err := s.hub.Patch(ctx, g, patch); err != nil {
		t.Fatal(err)
	}
}

// setPlacementTolerant selects the clusters, tolerating the taints OCM puts on clusters
// without a klusterlet.
func (s *suite) setPlacementTolerant(t *testing.T, clusters ...string) {
	t.Helper()
	s.setPlacementTolerating(t, []clusterv1beta1.Toleration{
		{Key: clusterv1.ManagedClusterTaintUnreachable, Operator: clusterv1beta1.TolerationOpExists},
		{Key: clusterv1.ManagedClusterTaintUnavailable, Operator: clusterv1beta1.TolerationOpExists},
	}, clusters...)
}

func (s *suite) pageOf(ctx context.Context, clusters ...string) (map[string]int, error) {
	list := &clusterv1beta1.PlacementDecisionList{}
	if err := s.hub.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1beta1.PlacementLabel: placement}); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	out := map[string]int{}
	for i, pd := range list.Items {
		for _, d := range pd.Status.Decisions {
			for _, c := range clusters {
				if d.ClusterName == c {
					out[c] = i
				}
			}
		}
	}
	return out, nil
}

func (s *suite) countClusterSecrets(ctx context.Context) (int, error) {
	var list corev1.SecretList
	if err := s.hub.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelSecretType: "cluster"}); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

func (s *suite) waitClusterSecrets(t *testing.T, n int) {
	t.Helper()
	s.eventually(t, fmt.Sprintf("hub: %d cluster secrets", n), 3*time.Minute, func(ctx context.Context) (bool, string) {
		got, err := s.countClusterSecrets(ctx)
		if err != nil {
			return false, err.Error()
		}
		return got == n, fmt.Sprintf("%d cluster secrets", got)
	})
}

func (s *suite) waitCondition(t *testing.T, condType, reason string) *v1alpha1.GitOpsCluster {
	t.Helper()
	var g *v1alpha1.GitOpsCluster
	s.eventually(t, fmt.Sprintf("GitOpsCluster %s=True (%s)", condType, reason), 2*time.Minute, func(ctx context.Context) (bool, string) {
		var err error
		g, err = s.goc(ctx)
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(g.Status.Conditions, condType)
		if c == nil {
			return false, "no condition"
		}
		return c.Status == metav1.ConditionTrue && c.Reason == reason, c.Reason + ": " + c.Message
	})
	return g
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }
