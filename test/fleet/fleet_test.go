package fleet_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestFleetSmoke starts a hub and two managed clusters, checks registration, placement and the
// work agent end to end, and checks that Stop leaves no process behind.
func TestFleetSmoke(t *testing.T) {
	fleet.SkipIfDisabled(t)
	_, _, k8sTime, ocmTime, err := fleet.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("binaries ready: kubernetes %s, OCM %s (minutes = built now on a cold cache; milliseconds = cached)",
		k8sTime.Round(time.Millisecond), ocmTime.Round(time.Millisecond))

	f := fleet.StartForTest(t, fleet.Options{BindingNamespace: "fleet-smoke"})
	t.Logf("fleet up in %s (target with cached binaries: 90s)", f.UpTime.Round(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	checkIdentities(t, f)
	checkClustersJoined(ctx, t, f)
	checkPlacementSelectsAll(ctx, t, f)
	checkWorkLandsOnItsClusterOnly(ctx, t, f)
	checkStopLeavesNothing(t, f)
}

// checkIdentities: no component runs as system:masters. OCM's and Kubernetes' own processes
// authenticate as the identities a real install gives them; only the harness's admin
// kubeconfigs (the person running the test) carry it.
func checkIdentities(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	ids, err := f.Identities()
	if err != nil {
		t.Fatal(err)
	}
	if masters, err := f.PrivilegedKubeconfigs(); err != nil || len(masters) > 0 {
		t.Errorf("components in system:masters (a real install gives each its own RBAC): %v %v", masters, err)
	}
	if len(ids) < 5 {
		t.Errorf("found only %d kubeconfigs in %s: %v", len(ids), f.Dir(), ids)
	}
}

// checkClustersJoined: both clusters joined and are available.
func checkClustersJoined(ctx context.Context, t *testing.T, f *fleet.Fleet) {
	t.Helper()
	hub := f.HubClient()
	for _, name := range f.Clusters() {
		mc := &clusterv1.ManagedCluster{}
		if err := hub.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{clusterv1.ManagedClusterConditionJoined, clusterv1.ManagedClusterConditionAvailable} {
			if !meta.IsStatusConditionTrue(mc.Status.Conditions, c) {
				t.Errorf("%s: condition %s is not true: %+v", name, c, mc.Status.Conditions)
			}
		}
	}
}

// checkPlacementSelectsAll: a Placement over the cluster set selects both clusters.
func checkPlacementSelectsAll(ctx context.Context, t *testing.T, f *fleet.Fleet) {
	t.Helper()
	hub := f.HubClient()
	start := time.Now()
	placement := &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: f.BindingNamespace()},
		Spec:       clusterv1beta1.PlacementSpec{ClusterSets: []string{f.ClusterSet()}},
	}
	if err := hub.Create(ctx, placement); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, f, "PlacementDecision listing both clusters", func() (bool, error) {
		list := &clusterv1beta1.PlacementDecisionList{}
		if err := hub.List(ctx, list, client.InNamespace(placement.Namespace),
			client.MatchingLabels{clusterv1beta1.PlacementLabel: placement.Name}); err != nil {
			return false, err
		}
		var got []string
		for _, d := range list.Items {
			for _, c := range d.Status.Decisions {
				got = append(got, c.ClusterName)
			}
		}
		slices.Sort(got)
		return slices.Equal(got, f.Clusters()), nil
	})
	t.Logf("placement decided in %s", time.Since(start).Round(100*time.Millisecond))
}

// checkWorkLandsOnItsClusterOnly: a ManifestWork in cluster1's namespace lands on cluster1's
// own API server, with status feedback, and not on cluster2.
func checkWorkLandsOnItsClusterOnly(ctx context.Context, t *testing.T, f *fleet.Fleet) {
	t.Helper()
	hub := f.HubClient()
	start := time.Now()
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-smoke", Namespace: "default"},
		Data:       map[string]string{"hello": "cluster1"},
	}
	labels := map[string]string{"app": "fleet-smoke"}
	deploy := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-smoke", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none:0"}}},
			},
		},
	}
	work := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-smoke", Namespace: "cluster1"},
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
				{RawExtension: runtime.RawExtension{Object: cm}},
				{RawExtension: runtime.RawExtension{Object: deploy}},
			}},
			// Status feedback, as the addon manager's deployment health check uses it.
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Group: "apps", Resource: "deployments", Namespace: "default", Name: "fleet-smoke"},
				FeedbackRules:      []workv1.FeedbackRule{{Type: workv1.WellKnownStatusType}},
			}},
		},
	}
	if err := hub.Create(ctx, work); err != nil {
		t.Fatal(err)
	}
	spoke1, err := f.SpokeClient("cluster1")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, f, "ConfigMap default/fleet-smoke on cluster1", func() (bool, error) {
		got := &corev1.ConfigMap{}
		if err := spoke1.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return got.Data["hello"] == "cluster1", nil
	})
	waitFor(ctx, t, f, "ManifestWork status Applied", func() (bool, error) {
		w := &workv1.ManifestWork{}
		if err := hub.Get(ctx, client.ObjectKeyFromObject(work), w); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied), nil
	})
	t.Logf("manifestwork applied on cluster1 in %s", time.Since(start).Round(100*time.Millisecond))
	spoke2, err := f.SpokeClient("cluster2")
	if err != nil {
		t.Fatal(err)
	}
	if err := spoke2.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("cluster2 should not have the ConfigMap: %v", err)
	}
}

// checkStopLeavesNothing: Stop ends every process of the fleet, and its process group.
func checkStopLeavesNothing(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	start := time.Now()
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("fleet stopped in %s", time.Since(start).Round(100*time.Millisecond))
	for _, p := range f.Processes() {
		if done, _ := p.Exited(); !done {
			t.Errorf("process %s (pid %d) still running after Stop", p.Name, p.Pid())
		}
		// Nothing may be left in its process group either.
		if node.GroupHasLiveMembers(p.Pid()) {
			t.Errorf("process group of %s (pgid %d) still has running members", p.Name, p.Pid())
		}
	}
}

// TestFleetStartFailureCleansUp: when a process dies during Start, Start fails with its log
// and stops everything it started, grandchildren included.
func TestFleetStartFailureCleansUp(t *testing.T) {
	fleet.SkipIfDisabled(t)
	k8s, ocm, _, _, err := fleet.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	fake := t.TempDir()
	scripts := map[string]string{
		"registration":          "echo boom from the fake registration controller; exit 3",
		"placement":             "sleep 300 & wait",
		"addon":                 "exec sleep 300",
		"registration-operator": "exec sleep 300",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(fake, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// OCM's RBAC manifests, which the fleet applies before starting the controllers.
	if err := os.Symlink(filepath.Join(ocm, "manifests"), filepath.Join(fake, "manifests")); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		started []*fleet.Process
	)
	_, err = fleet.Start(context.Background(), fleet.Options{
		Clusters:     []string{"solo"},
		Dir:          filepath.Join(t.TempDir(), "run"),
		K8sBinDir:    k8s,
		OCMBinDir:    fake,
		StartTimeout: time.Minute,
		Logf:         t.Logf,
		OnProcess: func(p *fleet.Process) {
			mu.Lock()
			defer mu.Unlock()
			started = append(started, p)
		},
	})
	if err == nil || !strings.Contains(err.Error(), "hub-registration-controller") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Start should fail naming the dead process and its log, got: %v", err)
	}
	t.Logf("Start failed as expected: %v", err)
	mu.Lock()
	defer mu.Unlock()
	if len(started) < 8 {
		t.Fatalf("expected the control planes and fake controllers to have started, got %d processes", len(started))
	}
	for _, p := range started {
		if done, _ := p.Exited(); !done {
			t.Errorf("process %s (pid %d) still running after a failed Start", p.Name, p.Pid())
		}
		if node.GroupHasLiveMembers(p.Pid()) {
			t.Errorf("process group of %s (pgid %d) still has running members", p.Name, p.Pid())
		}
	}
}

func waitFor(ctx context.Context, t *testing.T, f *fleet.Fleet, what string, cond func() (bool, error)) {
	t.Helper()
	if err := (poll.Waiter{Every: 250 * time.Millisecond, Guard: f.Err}).Wait(ctx, 2*time.Minute, poll.State(cond)); err != nil {
		t.Fatalf("waiting for %s: %v; logs in %s", what, err, f.LogDir())
	}
}
