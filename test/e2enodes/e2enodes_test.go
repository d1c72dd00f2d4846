package e2enodes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/chartrender"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const (
	// ns is the release namespace, the GitOpsCluster's and the cluster set's binding namespace.
	ns        = "open-cluster-management"
	agentNS   = "argocd"
	gocName   = "fleet-on-nodes"
	placement = "all-clusters"
	addonName = "argocd-agent-addon"
	imageTag  = "e2e"
	guestbook = "guestbook"
)

// TestOnRealNodes runs what the project ships as pods on real nodes: the chart's manager on
// the hub, installed with Helm's SDK as a user runs `helm install`; the Argo CD the components
// addon renders, on both managed clusters, from images built here and served by the fleet's
// registry through the chart's spoke.imageRegistry (the mirror a user of an air-gapped network
// sets); and the guestbook those Argo CD pods sync from the fleet's Git server.
func TestOnRealNodes(t *testing.T) {
	fleet.SkipIfDisabled(t)
	if os.Getenv("FLEET_REAL_NODES") != "1" {
		t.Skip("real-node e2e: set FLEET_REAL_NODES=1 to run it (root, hack/node-packages.sh's packages)")
	}
	if err := node.Available(); err != nil {
		t.Fatalf("FLEET_REAL_NODES=1 but real nodes cannot run here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	tmp := t.TempDir()

	// The images build while the fleet starts. The hub has Argo CD's CRDs, as a hub whose
	// Argo CD's Applications the pull model delivers.
	images := nodeapps.StartBuild(ctx, tmp, imageTag, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "e2enodes: "+format+"\n", args...)
	})
	argoDir, _, err := fleet.ArgoCDBinaries()
	if err != nil {
		t.Fatal(err)
	}
	f := fleet.StartForTest(t, fleet.Options{BindingNamespace: ns, RealNodes: true, HubCRDPaths: []string{filepath.Join(argoDir, "crds")}})
	reg := f.RegistryHost()
	imgs, errs := images.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if err := nodeapps.AddToFleet(ctx, f, imgs, tmp); err != nil {
		t.Fatal(err)
	}
	t.Logf("images in the fleet's registry %s: %v", reg, imgs.Refs(reg))

	hub := hubClient(t, f)
	start := time.Now()
	rel, err := chartrender.Install(f.HubKubeconfigPath(), filepath.Join(testenv.RepoRoot(), "charts", "argocd-agent-addon"), ns, testenv.ChartRelease,
		nodeapps.ChartValues(reg, imageTag), 5*time.Minute, t.Logf)
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, nodeapps.PodReport(ctx, f, "hub", ns))
	}
	t.Logf("helm install %s (revision %d): the manager's pod is Ready %s after the install began", rel.Name, rel.Version, time.Since(start).Round(time.Second))

	// The manager registers the clusters: the GitOpsCluster's Placement selects both, and
	// each gets the addon, whose components install Argo CD as pods.
	pl := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: placement}}
	goc := &v1alpha1.GitOpsCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gocName},
		Spec: v1alpha1.GitOpsClusterSpec{
			PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: placement},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{
				Mode:                   v1alpha1.AgentModeAutonomous,
				PrincipalServerAddress: f.HostAddress(),
				PrincipalServerPort:    &intstr.IntOrString{Type: intstr.Int, IntVal: 443},
			},
		},
	}
	for _, o := range []client.Object{pl, goc} {
		if err := hub.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range f.Clusters() {
		eventually(ctx, t, f, c+": ManagedClusterAddOn "+addonName, 3*time.Minute, func(ctx context.Context) (bool, string) {
			mca := &addonv1alpha1.ManagedClusterAddOn{}
			err := hub.Get(ctx, client.ObjectKey{Namespace: c, Name: addonName}, mca)
			return err == nil, fmt.Sprint(err)
		})
	}
	t.Logf("the manager's pod registered %v %s after the install began", f.Clusters(), time.Since(start).Round(time.Second))

	// Argo CD's workloads, as the components addon renders them, become ready as pods.
	for _, c := range f.Clusters() {
		sc, err := f.SpokeClient(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-redis"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-repo-server"}},
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-application-controller"}},
		} {
			eventually(ctx, t, f, fmt.Sprintf("%s: %T %s ready", c, w, w.GetName()), 6*time.Minute, func(ctx context.Context) (bool, string) {
				ok, state := nodeapps.WorkloadReady(ctx, sc, w)
				if !ok {
					state += "\n" + nodeapps.PodReport(ctx, f, c, agentNS)
				}
				return ok, state
			})
		}
		t.Logf("%s: Argo CD's redis, repo-server and application-controller run as pods, %s after the install began", c, time.Since(start).Round(time.Second))
	}

	// The guestbook, synced by each cluster's Argo CD pods from the fleet's Git server.
	git, err := fleet.StartGitServerOn(filepath.Join(tmp, "git"), f.HostAddress())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = git.Close() })
	repo, err := git.CreateRepo(guestbook)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit(nodeapps.GuestbookFiles(imgs.HelloRef(reg)), "guestbook"); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Clusters() {
		sc, err := f.SpokeClient(c)
		if err != nil {
			t.Fatal(err)
		}
		app := nodeapps.GuestbookApp(agentNS, git.URL()+"/"+guestbook+".git")
		if err := sc.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, f, c+": guestbook Synced and Healthy", 6*time.Minute, func(ctx context.Context) (bool, string) {
			if err := sc.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
				return false, err.Error()
			}
			sync, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
			health, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
			conds, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
			return sync == "Synced" && health == "Healthy", fmt.Sprintf("sync %q health %q conditions %v\n%s", sync, health, conds, nodeapps.PodReport(ctx, f, c, guestbook))
		})
		t.Logf("%s: guestbook Synced and Healthy (its pod runs), %s after the install began", c, time.Since(start).Round(time.Second))
	}
	if repo.Requests() == 0 {
		t.Errorf("the Git server served nothing")
	}

	pullModel(ctx, t, f, hub, git.URL()+"/"+guestbook+".git", start)
	brokenProbeIsCaught(ctx, t, f)
}

// pullModel delivers a hub Application to cluster1 through the basic pull model: the manager's
// pod wraps it into a ManifestWork, OCM's work agent applies it, the cluster's Argo CD pods sync
// it, and its status comes back to the hub.
func pullModel(ctx context.Context, t *testing.T, f *fleet.Fleet, hub client.Client, repoURL string, start time.Time) {
	const cluster, app, dest = "cluster1", "cluster1-guestbook-pull", "guestbook-pull"
	if err := fleet.EnsureNamespaces(ctx, hub, fleet.ArgoCDNamespace); err != nil {
		t.Fatal(err)
	}
	// The hub admin's steps: the cluster set bound into Argo CD's namespace and its default
	// AppProject, which decides what the delivered Application may deploy.
	objs := []client.Object{
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ArgoCDNamespace, Name: f.ClusterSet()}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: f.ClusterSet()}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
			"metadata": map[string]any{"name": "default", "namespace": fleet.ArgoCDNamespace},
			"spec": map[string]any{
				"sourceRepos":  []any{"*"},
				"destinations": []any{map[string]any{"server": "*", "namespace": "*"}},
			},
		}},
	}
	a := fleet.NewApplication(app, fleet.ArgoCDNamespace, repoURL, guestbook, dest)
	a.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	a.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: cluster, pullmodel.AnnotationSkipReconcile: "true"})
	objs = append(objs, a)
	for _, o := range objs {
		if err := hub.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	sc, err := f.SpokeClient(cluster)
	if err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, f, cluster+": the pull model's Application applied by the work agent", 3*time.Minute, func(ctx context.Context) (bool, string) {
		if _, err := fleet.GetApplicationState(ctx, sc, agentNS, app); err != nil {
			hubState, _ := fleet.GetApplicationState(ctx, hub, fleet.ArgoCDNamespace, app)
			return false, fmt.Sprintf("%v; on the hub: %s", err, hubState)
		}
		return true, ""
	})
	eventually(ctx, t, f, "hub: "+app+" Synced and Healthy, fed back from "+cluster, 6*time.Minute, func(ctx context.Context) (bool, string) {
		st, err := fleet.GetApplicationState(ctx, hub, fleet.ArgoCDNamespace, app)
		if err != nil {
			return false, err.Error()
		}
		return st.Sync == "Synced" && st.Health == "Healthy", st.String() + "\n" + nodeapps.PodReport(ctx, f, cluster, dest)
	})
	t.Logf("pull model: hub Application %s Synced and Healthy, synced by %s's Argo CD pods, %s after the install began", app, cluster, time.Since(start).Round(time.Second))
}

// brokenProbeIsCaught shows that the checks above fail on a broken pod spec: the manager's
// Deployment with its readiness probe on a port nothing listens on never becomes ready again,
// and the report names the probe.
func brokenProbeIsCaught(ctx context.Context, t *testing.T, f *fleet.Fleet) {
	hub := f.HubClient()
	d := &appsv1.Deployment{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.ChartRelease}, d); err != nil {
		t.Fatal(err)
	}
	broken := d.DeepCopy()
	probe := broken.Spec.Template.Spec.Containers[0].ReadinessProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatalf("the chart's manager has no HTTP readiness probe: %+v", probe)
	}
	probe.HTTPGet.Port = intstr.FromInt32(1)
	probe.PeriodSeconds, probe.FailureThreshold = 1, 1
	if err := hub.Patch(ctx, broken, client.MergeFrom(d)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		if ok, _ := nodeapps.WorkloadReady(ctx, hub, &appsv1.Deployment{ObjectMeta: d.ObjectMeta}); ok {
			t.Fatalf("a manager whose readiness probe targets port 1 reads as ready")
		}
		time.Sleep(2 * time.Second)
	}
	events := &corev1.EventList{}
	if err := hub.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, e := range events.Items {
		seen = seen || (e.Reason == "Unhealthy" && strings.Contains(e.Message, "Readiness probe failed"))
	}
	if !seen {
		t.Errorf("no Unhealthy event names the failed readiness probe")
	}
	t.Logf("a readiness probe broken on purpose keeps the manager's new pod unready (%s)", nodeapps.PodReport(ctx, f, "hub", ns))
}

func eventually(ctx context.Context, t *testing.T, f *fleet.Fleet, what string, timeout time.Duration, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		if err := f.Err(); err != nil {
			t.Fatalf("waiting for %s: a fleet process died: %v", what, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		ok, state := cond(cctx)
		cancel()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s: %s", what, last)
		}
		time.Sleep(2 * time.Second)
	}
}

func hubClient(t *testing.T, f *fleet.Fleet) client.Client {
	scheme := fleet.Scheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(f.HubConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
