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
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/cmp"
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
	node.RequireForTest(t)
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
	// The hub admin's Argo CD, from the pinned install.yaml with images from the mirror and the
	// ManifestWork health check (docs/cmp.md), as pods; the chart then adds the ocm-manifestwork
	// plugin sidecar to its repo-server with its Helm hooks.
	if _, err := f.StartArgoCD(ctx, "hub", fleet.ArgoCDOptions{ArgoCDCM: map[string]string{cmp.HealthCheckKey: cmp.HealthCheck()}}); err != nil {
		t.Fatal(err)
	}
	values := nodeapps.ChartValues(reg, imageTag)
	values["cmp"] = map[string]any{"enabled": true, "sidecar": map[string]any{"install": true}}
	rel, err := chartrender.Install(f.HubKubeconfigPath(), filepath.Join(testenv.RepoRoot(), "charts", "argocd-agent-addon"), ns, testenv.ChartRelease,
		values, 5*time.Minute, t.Logf)
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, nodeapps.PodReport(ctx, f, "hub", ns))
	}
	t.Logf("helm install %s (revision %d): the manager's pod is Ready %s after the install began", rel.Name, rel.Version, time.Since(start).Round(time.Second))
	servicesReachPods(ctx, t, f, "hub", ns)

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
				ok, state := fleet.WorkloadReady(ctx, sc, w)
				if !ok {
					state += "\n" + nodeapps.PodReport(ctx, f, c, agentNS)
				}
				return ok, state
			})
		}
		t.Logf("%s: Argo CD's redis, repo-server and application-controller run as pods, %s after the install began", c, time.Since(start).Round(time.Second))
		agentPodWaitsForItsImage(ctx, t, f, c, sc)
		servicesReachPods(ctx, t, f, c, agentNS)
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
	resourceReporter(ctx, t, f, "cluster1", filepath.Join(tmp, "argocd-agent-addon"), nodeapps.ManagerRepository(reg)+":"+imageTag)
	cmpPluginOnTheHub(ctx, t, f, hub, git, imgs.HelloRef(reg), start)
	brokenProbeIsCaught(ctx, t, f)
}

// agentPodWaitsForItsImage: argocd-agent's image cannot be built here, so its container waits
// for the image; the pod is scheduled, its volumes (the client certificate the project's signer
// issued, mounted by OCM) are mounted, and the cert-reloader sidecar, from the project's image,
// runs beside it.
func agentPodWaitsForItsImage(ctx context.Context, t *testing.T, f *fleet.Fleet, cluster string, c client.Client) {
	eventually(ctx, t, f, cluster+": the agent pod scheduled, its reloader running, the agent waiting for its image", 4*time.Minute, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(agentNS), client.MatchingLabels{addon.LabelComponent: "agent"}); err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d agent pods", len(pods.Items))
		}
		var reloaderRuns, agentWaits bool
		for _, st := range pods.Items[0].Status.ContainerStatuses {
			switch st.Name {
			case addon.ReloaderContainerName:
				reloaderRuns = st.State.Running != nil
			case addon.AgentContainerName:
				agentWaits = st.State.Waiting != nil && (st.State.Waiting.Reason == "ErrImagePull" || st.State.Waiting.Reason == "ImagePullBackOff")
			}
		}
		return reloaderRuns && agentWaits, nodeapps.PodReport(ctx, f, cluster, agentNS)
	})
	t.Logf("%s: the agent pod's cert-reloader runs; argocd-agent waits for its image", cluster)
}

// servicesReachPods checks that every Service of a namespace selects running pods: each has a
// ready endpoint, but those whose only pods are argocd-agent's, which waits for its image.
func servicesReachPods(ctx context.Context, t *testing.T, f *fleet.Fleet, cluster, namespace string) {
	c, err := nodeapps.ClusterClient(f, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	eventually(ctx, t, f, cluster+": every Service in "+namespace+" has a ready endpoint", 2*time.Minute, func(ctx context.Context) (bool, string) {
		services := &corev1.ServiceList{}
		if err := c.List(ctx, services, client.InNamespace(namespace)); err != nil {
			return false, err.Error()
		}
		names = nil
		var empty []string
		for _, svc := range services.Items {
			if svc.Spec.Selector == nil || svc.Spec.Selector[addon.LabelName] == addon.AgentName {
				continue
			}
			names = append(names, svc.Name)
			slices := &discoveryv1.EndpointSliceList{}
			if err := c.List(ctx, slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
				return false, err.Error()
			}
			ready := 0
			for _, sl := range slices.Items {
				for _, ep := range sl.Endpoints {
					if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
						ready++
					}
				}
			}
			if ready == 0 {
				empty = append(empty, fmt.Sprintf("%s (selector %v)", svc.Name, svc.Spec.Selector))
			}
		}
		return len(empty) == 0 && len(names) > 0, fmt.Sprintf("no ready endpoint: %v\n%s", empty, nodeapps.PodReport(ctx, f, cluster, namespace))
	})
	t.Logf("%s: the Services in %s reach ready pods: %v", cluster, namespace, names)
}

// resourceReporter runs the documented step of a cluster admin: see
// nodeapps.InstallResourceReporter.
func resourceReporter(ctx context.Context, t *testing.T, f *fleet.Fleet, cluster, bin, image string) {
	if err := nodeapps.InstallResourceReporter(ctx, f, cluster, bin, image, agentNS); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: the resource reporter runs as a pod", cluster)
}

// cmpPluginOnTheHub: the hub's Argo CD repo-server, with the plugin sidecar the chart's hooks
// added, renders a guestbook through the ocm-manifestwork plugin into a ManifestWork for
// cluster2, whose work agent applies it; the guestbook's pod runs there and the hub
// Application reads Healthy through the ManifestWork health check.
func cmpPluginOnTheHub(ctx context.Context, t *testing.T, f *fleet.Fleet, hub client.Client, git *fleet.GitServer, image string, start time.Time) {
	const cluster, app, dest = "cluster2", "guestbook-cmp", "guestbook-cmp"
	repoServer := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ArgoCDNamespace, Name: "argocd-repo-server"}}
	eventually(ctx, t, f, "hub: Argo CD's repo-server rolled out with the plugin sidecar", 4*time.Minute, func(ctx context.Context) (bool, string) {
		ok, state := fleet.WorkloadReady(ctx, hub, repoServer)
		sidecar := false
		for _, c := range repoServer.Spec.Template.Spec.Containers {
			sidecar = sidecar || strings.Contains(c.Image, "argocd-agent-addon")
		}
		return ok && sidecar, fmt.Sprintf("%s, sidecar %t\n%s", state, sidecar, nodeapps.PodReport(ctx, f, "hub", fleet.ArgoCDNamespace))
	})
	repo, err := git.CreateRepo(app)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for k, v := range nodeapps.GuestbookFiles(image) {
		files[strings.Replace(k, guestbook+"/", app+"/", 1)] = v
	}
	files[app+"/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + dest + "}\n"
	if _, err := repo.Commit(files, "guestbook through the plugin"); err != nil {
		t.Fatal(err)
	}
	a := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": app, "namespace": fleet.ArgoCDNamespace},
		"spec": map[string]any{
			"project": "default",
			"source": map[string]any{
				"repoURL": git.URL() + "/" + app + ".git", "path": app, "targetRevision": "main",
				"plugin": map[string]any{"name": cmp.PluginName + "-" + cmp.PluginVersion, "env": []any{
					map[string]any{"name": "CLUSTERS", "value": cluster},
					map[string]any{"name": "NAMESPACE", "value": dest},
				}},
			},
			"destination": map[string]any{"server": "https://kubernetes.default.svc"},
			"syncPolicy":  map[string]any{"automated": map[string]any{}},
		},
	}}
	if err := hub.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	sc, err := f.SpokeClient(cluster)
	if err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, f, cluster+": the guestbook the plugin rendered runs", 5*time.Minute, func(ctx context.Context) (bool, string) {
		hubState, _ := fleet.GetApplicationState(ctx, hub, fleet.ArgoCDNamespace, app)
		ok, state := fleet.WorkloadReady(ctx, sc, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: dest, Name: guestbook}})
		return ok, state + "; hub: " + hubState.String() + "\n" + nodeapps.PodReport(ctx, f, "hub", fleet.ArgoCDNamespace)
	})
	eventually(ctx, t, f, "hub: "+app+" Healthy through the ManifestWork health check", 3*time.Minute, func(ctx context.Context) (bool, string) {
		st, err := fleet.GetApplicationState(ctx, hub, fleet.ArgoCDNamespace, app)
		if err != nil {
			return false, err.Error()
		}
		return st.Sync == "Synced" && st.Health == "Healthy", st.String()
	})
	t.Logf("hub: Argo CD's repo-server pod with the plugin sidecar delivered %s to %s, %s after the install began", app, cluster, time.Since(start).Round(time.Second))
}

// pullModel delivers a hub Application to cluster1 through the basic pull model: the manager's
// pod wraps it into a ManifestWork, OCM's work agent applies it, the cluster's Argo CD pods sync
// it, and its status comes back to the hub.
func pullModel(ctx context.Context, t *testing.T, f *fleet.Fleet, hub client.Client, repoURL string, start time.Time) {
	const cluster, app, dest = "cluster1", "cluster1-guestbook-pull", "guestbook-pull"
	if err := fleet.EnsureNamespaces(ctx, hub, fleet.ArgoCDNamespace); err != nil {
		t.Fatal(err)
	}
	// The hub admin's step: the cluster set bound into Argo CD's namespace. Its "default"
	// AppProject, which decides what the delivered Application may deploy, is the one
	// argocd-server made.
	objs := []client.Object{
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ArgoCDNamespace, Name: f.ClusterSet()}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: f.ClusterSet()}},
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
		if ok, _ := fleet.WorkloadReady(ctx, hub, &appsv1.Deployment{ObjectMeta: d.ObjectMeta}); ok {
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
