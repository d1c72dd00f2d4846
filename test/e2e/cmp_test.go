package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/cmp"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/chartrender"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// testCMPDeliversAFolderWithoutArgoCD runs the binary's Config Management Plugin command on a
// folder, as Argo CD's cmp-server would (in the folder, with the Application's plugin
// environment), applies its ManifestWorks on the hub, and checks that OCM's work agent alone
// puts the objects on the managed cluster.
func testCMPDeliversAFolderWithoutArgoCD(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	const cluster, workloadNS = "cluster2", "cmp-guestbook"

	dir := t.TempDir()
	files := fleet.GuestbookFiles(1, "registry.example/guestbook:v1")
	files["guestbook/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + workloadNS + "}\n"
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, s.managerBin, "cmp", "generate")
	cmd.Dir = filepath.Join(dir, "guestbook")
	cmd.Env = append(os.Environ(),
		"ARGOCD_APP_NAME=cmp-guestbook", "ARGOCD_APP_NAMESPACE=argocd",
		"ARGOCD_ENV_CLUSTERS="+cluster, "ARGOCD_ENV_NAMESPACE="+workloadNS)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cmp generate: %v: %s", err, stderr.String())
	}

	var works []*workv1.ManifestWork
	for _, doc := range strings.Split(string(out), "---\n") {
		w := &workv1.ManifestWork{}
		if err := yaml.UnmarshalStrict([]byte(doc), w); err != nil {
			t.Fatalf("output is not ManifestWorks: %v\n%s", err, out)
		}
		works = append(works, w)
	}
	wantName := cmp.WorkBase(cmp.Options{Name: "cmp-guestbook", Application: "cmp-guestbook"}) + "-0"
	if len(works) != 1 || works[0].Namespace != cluster || works[0].Name != wantName {
		t.Fatalf("want one ManifestWork %s in %s, got %d (%v)", wantName, cluster, len(works), works)
	}
	for _, w := range works {
		if err := s.hub.Create(ctx, w); err != nil {
			t.Fatalf("the hub refused the generated ManifestWork: %v", err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, w := range works {
			if err := client.IgnoreNotFound(s.hub.Delete(ctx, w)); err != nil {
				t.Errorf("deleting %s: %v", w.Name, err)
			}
		}
	})

	spoke := s.spokes[cluster]
	argoOnSpoke := spoke.Get(ctx, client.ObjectKey{Name: "applications.argoproj.io"}, &apiextensionsv1.CustomResourceDefinition{})
	if !apierrors.IsNotFound(argoOnSpoke) {
		// Run alone (-run TestArgoCDScenarios/CMP), the cluster has never had Argo CD; after the Argo CD
		// scenarios its CRDs stay, but no Application names this workload.
		t.Logf("%s: Argo CD's Application CRD lookup: %v", cluster, argoOnSpoke)
	}

	s.eventually(t, fmt.Sprintf("%s: Deployment %s/guestbook-ui and its Service delivered by the work agent", cluster, workloadNS), 2*time.Minute,
		func(ctx context.Context) (bool, string) {
			d := &appsv1.Deployment{}
			if err := spoke.Get(ctx, client.ObjectKey{Namespace: workloadNS, Name: "guestbook-ui"}, d); err != nil {
				return false, err.Error()
			}
			if d.Spec.Template.Spec.Containers[0].Image != "registry.example/guestbook:v1" {
				return false, "image " + d.Spec.Template.Spec.Containers[0].Image
			}
			svc := &corev1.Service{}
			if err := spoke.Get(ctx, client.ObjectKey{Namespace: workloadNS, Name: "guestbook-ui"}, svc); err != nil {
				return false, err.Error()
			}
			return true, ""
		})
	s.eventually(t, "hub: the ManifestWork reports Applied", time.Minute, func(ctx context.Context) (bool, string) {
		w := &workv1.ManifestWork{}
		if err := s.hub.Get(ctx, client.ObjectKeyFromObject(works[0]), w); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
		if c == nil || c.Status != "True" {
			return false, fmt.Sprintf("conditions %v", w.Status.Conditions)
		}
		return true, ""
	})

	// Deleting the ManifestWork removes the workload: the work agent owns what it applied.
	if err := s.hub.Delete(ctx, works[0]); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, fmt.Sprintf("%s: Deployment %s/guestbook-ui removed with its ManifestWork", cluster, workloadNS), 2*time.Minute,
		func(ctx context.Context) (bool, string) {
			err := spoke.Get(ctx, client.ObjectKey{Namespace: workloadNS, Name: "guestbook-ui"}, &appsv1.Deployment{})
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			return false, fmt.Sprintf("still there (%v)", err)
		})
}

// testCMPPluginInHubArgoCD runs the plugin the way a user installs it: `helm upgrade` with
// cmp.sidecar.install=true, whose hook Job (a pod of the project's image) adds Argo CD's own
// argocd-cmp-server as a sidecar of the hub's repo-server, configured with the plugin.yaml the
// chart ships and running this project's image. A hub Application naming the plugin is synced
// from the fleet's Git server into ManifestWorks, OCM's work agent puts the workload on the managed
// cluster (which runs no Argo CD), and deleting the Application takes it away again.
func testCMPPluginInHubArgoCD(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	const cluster, workloadNS, appName = "cluster1", "cmp-argo", "cmp-argo-guestbook"

	files := fleet.GuestbookFiles(1, s.guestbookImg1)
	files["guestbook/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + workloadNS + "}\n"
	repo, sha := s.gitRepo(t, "git-cmp", "guestbook-cmp", files)
	start := time.Now()
	// Applications in another namespace (Argo CD's application.namespaces) for one tenant.
	argo, err := s.f.StartArgoCD(ctx, "hub", fleet.ArgoCDOptions{
		CmdParams: map[string]string{"application.namespaces": cmpTenantNS}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%-72s %7s", "hub: Argo CD up", time.Since(start).Round(10*time.Millisecond))
	t.Cleanup(func() {
		if err := argo.Stop(); err != nil {
			t.Errorf("stopping Argo CD: %v", err)
		}
	})
	// The hub admin's step (docs/cmp.md): the chart's hooks add the sidecar and the ManifestWork
	// health check to argocd-cm.
	if _, err := chartrender.Upgrade(s.f.HubKubeconfigPath(), filepath.Join(testenv.RepoRoot(), "charts", "argocd-agent-addon"), ns, testenv.ChartRelease,
		map[string]any{"cmp": map[string]any{"enabled": true, "sidecar": map[string]any{"install": true}}}, 5*time.Minute, t.Logf); err != nil {
		t.Fatalf("helm upgrade --set cmp.sidecar.install=true: %v\n%s", err, nodeapps.PodReport(ctx, s.f, "hub", ns))
	}
	s.eventually(t, "hub: the chart's hook put the ManifestWork health check into argocd-cm", time.Minute, func(ctx context.Context) (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: "argocd-cm"}, cm); err != nil {
			return false, err.Error()
		}
		return cm.Data[cmp.HealthCheckKey] == cmp.HealthCheck(), fmt.Sprintf("%d bytes under %s", len(cm.Data[cmp.HealthCheckKey]), cmp.HealthCheckKey)
	})
	repoServer := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ArgoCDNamespace, Name: fleet.ArgoCDRepoServer}}
	s.eventually(t, "hub: Argo CD's repo-server rolled out with the plugin sidecar the chart's hook added", 4*time.Minute, func(ctx context.Context) (bool, string) {
		ok, state := fleet.WorkloadReady(ctx, s.hub, repoServer)
		sidecar := false
		for _, c := range repoServer.Spec.Template.Spec.Containers {
			sidecar = sidecar || c.Image == s.reloaderImg
		}
		return ok && sidecar, fmt.Sprintf("%s, sidecar %t\n%s", state, sidecar, nodeapps.PodReport(ctx, s.f, "hub", fleet.ArgoCDNamespace))
	})

	app := cmpApplication(t, appName, repo.URL, "guestbook", cluster, workloadNS)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = client.IgnoreNotFound(s.hub.Delete(ctx, app))
	})
	if err := s.hub.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	work := &workv1.ManifestWork{}
	work.Namespace, work.Name = cluster, cmp.WorkBase(cmp.Options{Name: appName, Application: appName})+"-0"
	s.waitHubObject(t, "ManifestWork written by Argo CD from the plugin's output", work, true)
	s.eventually(t, fmt.Sprintf("%s: Deployment %s/%s delivered by the work agent", cluster, workloadNS, guestbookName), 2*time.Minute,
		func(ctx context.Context) (bool, string) {
			d := &appsv1.Deployment{}
			if err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: workloadNS, Name: guestbookName}, d); err != nil {
				return false, getState(err, "Deployment")
			}
			return containerImage(d, guestbookName) == s.guestbookImg1, "image " + containerImage(d, guestbookName)
		})
	s.eventually(t, "hub: Application Synced at the commit", 2*time.Minute, func(ctx context.Context) (bool, string) {
		st, err := fleet.GetApplicationState(ctx, s.hub, fleet.ArgoCDNamespace, appName)
		if err != nil {
			return false, getState(err, "Application")
		}
		return st.Sync == "Synced" && st.Revision == sha, st.String()
	})
	s.eventually(t, "hub: Application Healthy once the work agent reports the ManifestWork Available", 2*time.Minute, func(ctx context.Context) (bool, string) {
		st, err := fleet.GetApplicationState(ctx, s.hub, fleet.ArgoCDNamespace, appName)
		if err != nil {
			return false, getState(err, "Application")
		}
		return st.Health == "Healthy", st.String()
	})
	s.cmpFailureIsDegraded(t, cluster)
	s.cmpKustomizeOutsideArgoCDsNamespace(t, cluster)
	if err := s.spokes[cluster].Get(ctx, client.ObjectKey{Name: "applications.argoproj.io"}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
		t.Logf("%s: Argo CD's Application CRD lookup: %v (left by an earlier scenario; no Argo CD runs there now)", cluster, err)
	}

	if err := s.hub.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	s.waitHubObject(t, "ManifestWork removed with the Application", work, false)
	s.eventually(t, fmt.Sprintf("%s: Deployment %s/%s removed with its ManifestWork", cluster, workloadNS, guestbookName), 2*time.Minute,
		func(ctx context.Context) (bool, string) {
			err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: workloadNS, Name: guestbookName}, &appsv1.Deployment{})
			return apierrors.IsNotFound(err), fmt.Sprintf("still there (%v)", err)
		})
}

// cmpFailureIsDegraded delivers, through the plugin, an object of a kind the cluster does not
// serve: OCM's work agent cannot apply it, and with the ManifestWork health check the hub
// Application reads Degraded (without it, Healthy: Argo CD has no health for ManifestWorks).
func (s *suite) cmpFailureIsDegraded(t *testing.T, cluster string) {
	t.Helper()
	ctx := ctxFor(t)
	const appName = "cmp-argo-unknown-kind"
	repo, _ := s.gitRepo(t, "git-cmp-unknown", "unknown-kind", map[string]string{
		"widgets/widget.yaml": "apiVersion: widgets.example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\n",
	})
	app := cmpApplication(t, appName, repo.URL, "widgets", cluster, "")
	if err := s.hub.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, "hub: the plugin Application Degraded (the ManifestWork could not be applied)", 3*time.Minute, func(ctx context.Context) (bool, string) {
		u := pullmodel.NewApplication()
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: appName}, u); err != nil {
			return false, getState(err, "Application")
		}
		health, _, _ := unstructured.NestedString(u.Object, "status", "health", "status")
		var messages []string
		resources, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
		for _, r := range resources {
			if m, _, _ := unstructured.NestedString(r.(map[string]any), "health", "message"); m != "" {
				messages = append(messages, m)
			}
		}
		return health == "Degraded", fmt.Sprintf("health %s, resource messages %v", health, messages)
	})
	if err := s.hub.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, "hub: the unknown-kind Application gone", 4*time.Minute, func(ctx context.Context) (bool, string) {
		err := s.hub.Get(ctx, client.ObjectKeyFromObject(app), pullmodel.NewApplication())
		return apierrors.IsNotFound(err), getState(err, "Application")
	})
}

// cmpTenantNS is a hub namespace whose Applications the hub Argo CD serves (apps in any
// namespace), as a tenant's.
const cmpTenantNS = "team-cmp"

// cmpKustomizeOutsideArgoCDsNamespace delivers a Kustomize overlay through the plugin for an
// Application in a tenant's namespace, under the AppProject the README asks for: only
// ManifestWorks, only that cluster's namespace, Applications only from the tenant's namespace.
func (s *suite) cmpKustomizeOutsideArgoCDsNamespace(t *testing.T, cluster string) {
	t.Helper()
	ctx := ctxFor(t)
	const appName, workloadNS = "guestbook", "cmp-team"
	files := fleet.GuestbookFiles(1, s.guestbookImg1)
	files["guestbook/kustomization.yaml"] = "resources: [guestbook-ui-deployment.yaml, guestbook-ui-svc.yaml]\n"
	files["overlays/team/kustomization.yaml"] = "resources: [../../guestbook, namespace.yaml]\nnamePrefix: team-\nnamespace: " + workloadNS + "\n"
	files["overlays/team/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + workloadNS + "}\n"
	repo, _ := s.gitRepo(t, "git-cmp-kustomize", "guestbook-kustomize", files)
	project := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, `apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  sourceRepos: [%[3]q]
  sourceNamespaces: [%[1]s]
  destinations: [{server: https://kubernetes.default.svc, namespace: %[4]s}]
  namespaceResourceWhitelist: [{group: work.open-cluster-management.io, kind: ManifestWork}]
  clusterResourceWhitelist: []
`, cmpTenantNS, fleet.ArgoCDNamespace, repo.URL, cluster), &project.Object); err != nil {
		t.Fatal(err)
	}
	app := cmpApplication(t, appName, repo.URL, "overlays/team", cluster, "")
	app.SetNamespace(cmpTenantNS)
	if err := unstructured.SetNestedField(app.Object, cmpTenantNS, "spec", "project"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(app.Object, cluster, "spec", "destination", "namespace"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cmpTenantNS}}, project, app} {
		if err := s.hub.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = client.IgnoreNotFound(s.hub.Delete(ctx, app))
		_ = client.IgnoreNotFound(s.hub.Delete(ctx, project))
	})
	s.eventually(t, fmt.Sprintf("%s: Deployment %s/team-%s from the overlay of an Application in %s", cluster, workloadNS, guestbookName, cmpTenantNS), 3*time.Minute,
		func(ctx context.Context) (bool, string) {
			err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: workloadNS, Name: "team-" + guestbookName}, &appsv1.Deployment{})
			if err != nil {
				st, _ := fleet.GetApplicationState(ctx, s.hub, cmpTenantNS, appName)
				return false, getState(err, "Deployment") + "; hub Application: " + st.String()
			}
			return true, ""
		})
	// The works are named after the Application's instance name, which tells it from an
	// Application of the same name in Argo CD's namespace.
	work := &workv1.ManifestWork{}
	opts := cmp.Options{Name: cmp.WorkName(cmpTenantNS + "_" + appName), Application: cmpTenantNS + "_" + appName}
	work.Namespace, work.Name = cluster, cmp.WorkBase(opts)+"-0"
	s.waitHubObject(t, "ManifestWork of the tenant's Application", work, true)
	// Argo CD deletes, on the resources finalizer, what its resource tree holds: wait until the
	// hub Application lists the ManifestWork it just created, as it would long before a person
	// deletes it (deleted in the same second, Argo CD deleted nothing and the work stayed).
	s.eventually(t, "hub: the tenant's Application lists its ManifestWork", time.Minute, func(ctx context.Context) (bool, string) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(app.GroupVersionKind())
		if err := s.hub.Get(ctx, client.ObjectKeyFromObject(app), live); err != nil {
			return false, err.Error()
		}
		resources, _, _ := unstructured.NestedSlice(live.Object, "status", "resources")
		for _, r := range resources {
			if m, ok := r.(map[string]any); ok && m["kind"] == "ManifestWork" && m["name"] == work.Name {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status.resources %v", resources)
	})
	if err := s.hub.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	defer s.logArgoCDTail(t, "hub", fleet.ArgoCDApplicationController)
	s.eventually(t, cluster+": the overlay's Deployment removed with the tenant's Application", 2*time.Minute, func(ctx context.Context) (bool, string) {
		err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: workloadNS, Name: "team-" + guestbookName}, &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("still there (%v); hub: %s; %s", err, describeDeletion(ctx, s.hub, app), describeDeletion(ctx, s.hub, work))
	})
}

// describeDeletion says where obj is in its deletion on c: gone, or its deletion time and the
// finalizers that hold it.
func describeDeletion(ctx context.Context, c client.Client, obj client.Object) string {
	live := &unstructured.Unstructured{}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err.Error()
	}
	live.SetGroupVersionKind(gvk)
	what := fmt.Sprintf("%s %s/%s", gvk.Kind, obj.GetNamespace(), obj.GetName())
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return fmt.Sprintf("%s: %v", what, getState(err, gvk.Kind))
	}
	if live.GetDeletionTimestamp() == nil {
		return what + " not being deleted"
	}
	return fmt.Sprintf("%s deleting since %s, finalizers %v", what, live.GetDeletionTimestamp().Format(time.TimeOnly), live.GetFinalizers())
}

// cmpApplication is a hub Application of the ocm-manifestwork plugin delivering path of repoURL
// to cluster (namespace, when set, for objects that name none), with automated sync and the
// resources finalizer.
func cmpApplication(t *testing.T, name, repoURL, path, cluster, namespace string) *unstructured.Unstructured {
	t.Helper()
	env := fmt.Sprintf("      - {name: CLUSTERS, value: %s}\n", cluster)
	if namespace != "" {
		env += fmt.Sprintf("      - {name: NAMESPACE, value: %s}\n", namespace)
	}
	app := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: %s
  namespace: %s
  finalizers: [resources-finalizer.argocd.argoproj.io]
spec:
  project: default
  source:
    repoURL: %q
    path: %s
    targetRevision: main
    plugin:
      name: %s-%s
      env:
%s  destination: {server: https://kubernetes.default.svc}
  syncPolicy: {automated: {prune: true}}
`, name, fleet.ArgoCDNamespace, repoURL, path, cmp.PluginName, cmp.PluginVersion, env), &app.Object); err != nil {
		t.Fatal(err)
	}
	return app
}
