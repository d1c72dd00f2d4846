package clusters_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/clusters"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestRegistrationAtFleetScale registers a Placement's clusters spread over decision pages of
// 100, as OCM writes them (REGISTRATION_CLUSTERS, default 1000), and prints the time and writes
// to register them, at rest, for one label change and for one departure.
func TestRegistrationAtFleetScale(t *testing.T) {
	n := 1000
	if v := os.Getenv("REGISTRATION_CLUSTERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	ns := "argocd-scale"
	createNamespace(t, ns)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%05d", i)
	}
	parallel(t, names, func(c string) error {
		return k8s.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: c, Labels: map[string]string{"env": "prod", "region": "eu"}}})
	})
	createPlacement(t, ns, "fleet")
	for page := 0; page*100 < n; page++ {
		pd := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fleet-decision-%d", page),
			Labels: map[string]string{clusterv1beta1.PlacementLabel: "fleet"}}}
		if err := k8s.Create(ctx, pd); err != nil {
			t.Fatal(err)
		}
		for _, c := range names[page*100 : min(n, (page+1)*100)] {
			pd.Status.Decisions = append(pd.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: c})
		}
		if err := k8s.Status().Update(ctx, pd); err != nil {
			t.Fatal(err)
		}
	}

	w0, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	createRegistration(t, ns, "fleet", "fleet")
	eventually(t, fmt.Sprintf("%d cluster secrets", n), func() error {
		var list corev1.SecretList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusters.LabelRegistration: "fleet"}); err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d of %d", len(list.Items), n)
		}
		return nil
	})
	registered := time.Since(start)
	readyIs(t, ns, "fleet", metav1.ConditionTrue, clusters.ReasonRegistered)
	w1, _ := testenv.APIWrites(ctx, env.Config)
	first := testenv.DiffWrites(w0, w1)

	time.Sleep(3 * time.Second)
	w2, _ := testenv.APIWrites(ctx, env.Config)
	idle := testenv.DiffWrites(w1, w2)

	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: names[n/2]}, mc); err != nil {
		t.Fatal(err)
	}
	mc.Labels["env"] = "staging"
	start = time.Now()
	if err := k8s.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "label followed", secretHas(ns, clusters.SecretName(names[n/2]), map[string]string{"env": "staging"}))
	relabel := time.Since(start)
	w3, err := testenv.QuietWrites(ctx, env.Config, 2*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	oneLabel := testenv.DiffWrites(w2, w3)

	// The last cluster leaves its page.
	last := &clusterv1beta1.PlacementDecision{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("fleet-decision-%d", (n-1)/100)}, last); err != nil {
		t.Fatal(err)
	}
	last.Status.Decisions = last.Status.Decisions[:len(last.Status.Decisions)-1]
	start = time.Now()
	if err := k8s.Status().Update(ctx, last); err != nil {
		t.Fatal(err)
	}
	eventually(t, "departed cluster unregistered", gone(ns, clusters.SecretName(names[n-1])))
	departure := time.Since(start)
	w4, err := testenv.QuietWrites(ctx, env.Config, 2*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	oneDeparture := testenv.DiffWrites(w3, w4)

	t.Logf("%d clusters in %d decision pages: registered in %s, writes %v", n, (n+99)/100, registered.Round(time.Millisecond), first)
	t.Logf("idle 3s: writes %v; one label change: %s, writes %v; one departure: %s, writes %v",
		idle, relabel.Round(time.Millisecond), oneLabel, departure.Round(time.Millisecond), oneDeparture)
	if first["secrets"] != n {
		t.Errorf("registering wrote %d Secrets, want %d (one per cluster)", first["secrets"], n)
	}
	if len(idle) > 0 {
		t.Errorf("writes while idle: %v", idle)
	}
	if oneLabel["secrets"] != 1 {
		t.Errorf("one label change wrote %d Secrets, want 1", oneLabel["secrets"])
	}
	if oneDeparture["secrets"] != 1 {
		t.Errorf("one departure wrote %d Secrets, want 1 (its deletion)", oneDeparture["secrets"])
	}

	if err := k8s.Delete(ctx, &v1alpha1.ArgoCDClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "secrets removed with the registration", func() error {
		var list corev1.SecretList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusters.LabelRegistration: "fleet"}); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d left", len(list.Items))
		}
		return nil
	})
}

func parallel(t *testing.T, items []string, f func(string) error) {
	t.Helper()
	work := make(chan string)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if err := f(it); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}
