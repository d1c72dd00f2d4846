package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestPullModelAdmissionPolicy: the chart's ValidatingAdmissionPolicy, applied to a real API
// server with Argo CD's CRDs, refuses (Deny) a pull-model Application without skip-reconcile
// or without a cluster, with the policy's message, and admits a correct one and an unmarked
// one.
func TestPullModelAdmissionPolicy(t *testing.T) {
	objs, err := render(t, map[string]any{"pullModel": map[string]any{"admissionPolicy": "Deny"}})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true, WithoutOCM: true, WithArgoCD: true})
	ctx := context.Background()
	c := env.Client
	n := 0
	for _, o := range objs {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && strings.HasSuffix(o.GetName(), "-pull-model") {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("creating %s: %v", o.GetKind(), err)
			}
			n++
		}
	}
	if n != 2 {
		t.Fatalf("rendered %d policy objects, want a policy and its binding", n)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}); err != nil {
		t.Fatal(err)
	}
	app := func(name string, labels, annotations map[string]string) *unstructured.Unstructured {
		a := pullmodel.NewApplication()
		a.SetNamespace("argocd")
		a.SetName(name)
		a.SetLabels(labels)
		a.SetAnnotations(annotations)
		a.Object["spec"] = map[string]any{"project": "default", "destination": map[string]any{"server": pullmodel.InClusterServer}}
		return a
	}
	marked := map[string]string{pullmodel.LabelPull: "true"}
	// The API server enforces a new policy once its informer has seen it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Create(ctx, app("probe", marked, map[string]string{pullmodel.AnnotationCluster: "c1"}))
		if err != nil && strings.Contains(err.Error(), "skip-reconcile") {
			break
		}
		if err == nil {
			_ = c.Delete(ctx, app("probe", nil, nil))
		}
		if time.Now().After(deadline) {
			t.Fatalf("an Application without skip-reconcile is still admitted: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	err = c.Create(ctx, app("no-cluster", marked, map[string]string{pullmodel.AnnotationSkipReconcile: "true"}))
	if err == nil || !strings.Contains(err.Error(), "must name its managed cluster") {
		t.Errorf("an Application naming no cluster: %v", err)
	}
	inline := app("inline", marked, map[string]string{pullmodel.AnnotationCluster: "c1", pullmodel.AnnotationSkipReconcile: "true"})
	inline.Object["operation"] = map[string]any{"sync": map[string]any{"manifests": []any{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`}}}
	err = c.Create(ctx, inline)
	if err == nil || !strings.Contains(err.Error(), "inline manifests") {
		t.Errorf("an Application whose sync operation carries inline manifests: %v", err)
	}
	synced := app("synced", marked, map[string]string{pullmodel.AnnotationCluster: "c1", pullmodel.AnnotationSkipReconcile: "true"})
	synced.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "main"}}
	for name, a := range map[string]*unstructured.Unstructured{
		"synced":   synced,
		"good":     app("good", marked, map[string]string{pullmodel.AnnotationCluster: "c1", pullmodel.AnnotationSkipReconcile: "true"}),
		"unmarked": app("unmarked", nil, nil),
	} {
		if err := c.Create(ctx, a); err != nil {
			t.Errorf("%s Application refused: %v", name, err)
		}
	}

	// The author check: a tenant who may create Applications but not ManifestWorks in the
	// cluster's namespace cannot deliver there through the pull model.
	tenant := testenv.Identity{User: "tenant-alice"}
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "apps"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"}, Verbs: []string{"create", "get", "update"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "apps"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "apps"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: tenant.User}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c2"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "c2", Name: "works"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"work.open-cluster-management.io"}, Resources: []string{"manifestworks"}, Verbs: []string{"create"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "c2", Name: "works"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "works"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: tenant.User}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := tenant.AwaitAllowed(ctx, c, testenv.RBACCatchUp,
		authorizationv1.ResourceAttributes{Namespace: "argocd", Verb: "create", Group: "argoproj.io", Resource: "applications"},
		authorizationv1.ResourceAttributes{Namespace: "c2", Verb: "create", Group: workv1.GroupName, Resource: "manifestworks"}); err != nil {
		t.Fatal(err)
	}
	tc, err := client.New(tenant.Impersonating(env.Config), client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	target := func(cluster string) map[string]string {
		return map[string]string{pullmodel.AnnotationCluster: cluster, pullmodel.AnnotationSkipReconcile: "true"}
	}
	if err := tc.Create(ctx, app("tenant-unmarked", nil, nil)); err != nil {
		t.Errorf("the tenant's Application for no cluster refused: %v", err)
	}
	err = tc.Create(ctx, app("tenant-c1", marked, target("c1")))
	if err == nil || !strings.Contains(err.Error(), "may not create ManifestWorks in namespace c1") {
		t.Errorf("a tenant without ManifestWork rights in c1 delivering there: %v", err)
	}
	if err := tc.Create(ctx, app("tenant-c2", marked, target("c2"))); err != nil {
		t.Errorf("a tenant who may create ManifestWorks in c2 delivering there: %v", err)
	}
	// Re-pointing an admitted Application at a cluster the tenant cannot reach is refused too.
	moved := pullmodel.NewApplication()
	if err := tc.Get(ctx, client.ObjectKey{Namespace: "argocd", Name: "tenant-c2"}, moved); err != nil {
		t.Fatal(err)
	}
	moved.SetAnnotations(target("c1"))
	if err := tc.Update(ctx, moved); err == nil || !strings.Contains(err.Error(), "may not create ManifestWorks") {
		t.Errorf("re-pointing an Application at c1: %v", err)
	}
	// A trusted controller (the ApplicationSet controller, with the RBAC Argo CD's install
	// gives it) is not asked.
	controller := appSetController(t, c, "argocd")
	// It may not create ManifestWorks in c9 itself: only the policy's trust lets it through.
	if mayWrite, _, err := controller.Allowed(ctx, c, authorizationv1.ResourceAttributes{Namespace: "c9", Verb: "create", Group: workv1.GroupName, Resource: "manifestworks"}); err != nil || mayWrite {
		t.Fatalf("the ApplicationSet controller may create ManifestWorks in c9 (%v): the check below would not test the trust", err)
	}
	ac, err := client.New(controller.Impersonating(env.Config), client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ac.Create(ctx, app("appset-c9", marked, target("c9"))); err != nil {
		t.Errorf("the ApplicationSet controller's Application refused: %v", err)
	}
}

// TestPullModelWithTheChartsRBAC: the manager, run as the chart's ServiceAccount with only the
// chart's RBAC, delivers a marked Application of an ApplicationSet as a ManifestWork, writes the
// fed-back status onto it, keeps the ApplicationSet's report, and on deletion removes the
// ManifestWork and releases the Application's resources finalizer.
func TestPullModelWithTheChartsRBAC(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true, WithArgoCD: true})
	ctx := context.Background()
	admin := env.Client
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{releaseNS, "argocd", "cluster1"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	install := action.NewInstall(helmConfig(t, kubeconfig))
	install.ReleaseName, install.Namespace = releaseName, releaseNS
	install.Timeout = time.Minute
	if _, err := install.Run(loadChart(t), map[string]any{}); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	waitFor(t, "report API served", func() error {
		return admin.List(ctx, &reportv1alpha1.MulticlusterApplicationSetReportList{})
	})
	// The hub admin's steps: the cluster in a set bound to the hub Argo CD namespace, and the
	// default AppProject (argocd-server makes it on a real hub).
	project := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"sourceRepos": []any{"*"}, "destinations": []any{map[string]any{"server": "*", "namespace": "*"}},
	}}}
	project.SetGroupVersionKind(pullmodel.AppProjectGVK)
	project.SetNamespace("argocd")
	project.SetName("default")
	for _, o := range []client.Object{
		&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1", Labels: map[string]string{clusterv1beta2.ClusterSetLabel: "fleet"}}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}},
		&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "fleet"}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "fleet"}},
		project,
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	set := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"generators": []any{map[string]any{"list": map[string]any{"elements": []any{}}}},
		"template":   map[string]any{"metadata": map[string]any{}, "spec": map[string]any{"project": "default", "destination": map[string]any{"server": pullmodel.InClusterServer}}},
	}}}
	set.SetGroupVersionKind(pullmodel.ApplicationSetGVK)
	set.SetNamespace("argocd")
	set.SetName("guestbook")
	if err := admin.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	app := pullmodel.NewApplication()
	app.SetNamespace("argocd")
	app.SetName("cluster1-guestbook")
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: "cluster1", pullmodel.AnnotationSkipReconcile: "true"})
	app.SetFinalizers([]string{pullmodel.ResourcesFinalizer})
	app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "guestbook", UID: set.GetUID()}})
	app.Object["spec"] = map[string]any{"project": "default", "destination": map[string]any{"server": pullmodel.InClusterServer, "namespace": "guestbook"},
		"source": map[string]any{"repoURL": "https://git.example/guestbook", "path": "guestbook"}}
	if err := admin.Create(ctx, app); err != nil {
		t.Fatal(err)
	}

	asSA := testenv.ServiceAccount(releaseNS, releaseName).Impersonating(env.Config)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthProbeAddr = "0", "0"
	opts.Fleet.ManagedNamespaces = []string{releaseNS}
	opts.Fleet.ReloaderImage = "argocd-agent-addon:test"
	opts.PullModel.SealSecret = types.NamespacedName{Namespace: releaseNS, Name: releaseName + "-pull-model-seal"}
	// What manager.Run builds, with controller names allowed again: another test of this
	// package runs a manager in the same process.
	mo := manager.ControllerOptions(admin.Scheme(), opts)
	mo.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(asSA, mo)
	if err != nil {
		t.Fatal(err)
	}
	if err := manager.Setup(mctx, mgr, opts); err != nil {
		t.Fatal(err)
	}
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	w := &workv1.ManifestWork{}
	waitFor(t, "the ManifestWork written as the chart's identity", func() error {
		list := &workv1.ManifestWorkList{}
		if err := admin.List(ctx, list, client.InNamespace("cluster1")); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d ManifestWorks", len(list.Items))
		}
		*w = list.Items[0]
		return nil
	})
	// The work agent's part.
	w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}}
	w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
		ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application", Resource: "applications", Namespace: "argocd", Name: app.GetName()},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
			{Name: "syncStatus", Value: workv1.FieldValue{Type: workv1.String, String: ptr.To("Synced")}},
			{Name: "healthStatus", Value: workv1.FieldValue{Type: workv1.String, String: ptr.To("Healthy")}},
		}},
		Conditions: []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}},
	}}
	if err := admin.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hub Application's status written as the chart's identity", func() error {
		cur := pullmodel.NewApplication()
		if err := admin.Get(ctx, client.ObjectKeyFromObject(app), cur); err != nil {
			return err
		}
		if h, _, _ := unstructured.NestedString(cur.Object, "status", "health", "status"); h != "Healthy" {
			return fmt.Errorf("health %q", h)
		}
		return nil
	})
	waitFor(t, "the ApplicationSet report written as the chart's identity", func() error {
		rep := &reportv1alpha1.MulticlusterApplicationSetReport{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "argocd", Name: "guestbook"}, rep); err != nil {
			return err
		}
		if rep.Statuses.Summary.Healthy != "1" {
			return fmt.Errorf("summary %+v", rep.Statuses.Summary)
		}
		return nil
	})
	if err := admin.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ManifestWork deleted and the resources finalizer released", func() error {
		err := admin.Get(ctx, client.ObjectKeyFromObject(app), pullmodel.NewApplication())
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("Application still there: %v", err)
		}
		return nil
	})
}

// TestManagedClusterLabelPolicy: RBAC cannot limit a patch to some labels, so the chart's
// admission policy does: the manager's ServiceAccount may add and remove its own
// components-* labels of a ManagedCluster and change nothing else of it; others are not bound
// by the policy.
func TestManagedClusterLabelPolicy(t *testing.T) {
	objs, err := render(t, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true})
	ctx := context.Background()
	admin := env.Client
	n := 0
	for _, o := range objs {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && strings.HasSuffix(o.GetName(), "-managedcluster-labels") {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatalf("creating %s: %v", o.GetKind(), err)
			}
			n++
		}
	}
	if n != 2 {
		t.Fatalf("rendered %d managedcluster policy objects, want a policy and its binding", n)
	}
	sa := testenv.ServiceAccount(releaseNS, releaseName)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "mc-patch"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"get", "patch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mc-patch"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "mc-patch"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: releaseNS, Name: releaseName}}}
	patchClusters := authorizationv1.ResourceAttributes{Verb: "patch", Group: clusterv1.GroupName, Resource: "managedclusters"}
	if err := testenv.Grant(ctx, admin, sa, []authorizationv1.ResourceAttributes{patchClusters}, role, binding); err != nil {
		t.Fatal(err)
	}
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "mc1", Labels: map[string]string{"env": "prod"}},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
	if err := admin.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	manager, err := client.New(sa.Impersonating(env.Config), client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(c client.Client, body string) error {
		return c.Patch(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "mc1"}}, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	// The policy takes effect once the API server has loaded it: wait for a refusal.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := patch(manager, `{"metadata":{"labels":{"env":"dev"}}}`)
		if err != nil && strings.Contains(err.Error(), "may add and remove only labels") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the manager changed another label: %v", err)
		}
		_ = patch(admin, `{"metadata":{"labels":{"env":"prod"}}}`)
		time.Sleep(200 * time.Millisecond)
	}
	for name, body := range map[string]string{
		"adding its clearance label":   `{"metadata":{"labels":{"argocd-agent-addon.open-cluster-management.io/components-abc":"true"}}}`,
		"removing its clearance label": `{"metadata":{"labels":{"argocd-agent-addon.open-cluster-management.io/components-abc":null}}}`,
	} {
		if err := patch(manager, body); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	for name, body := range map[string]string{
		"removing another label": `{"metadata":{"labels":{"env":null}}}`,
		"joining a cluster set":  `{"metadata":{"labels":{"cluster.open-cluster-management.io/clusterset":"other"}}}`,
		"changing the spec":      `{"spec":{"hubAcceptsClient":false}}`,
		"adding an annotation":   `{"metadata":{"annotations":{"a":"b"}}}`,
		"adding a finalizer":     `{"metadata":{"finalizers":["example.com/hold"]}}`,
		"opting the cluster out": `{"metadata":{"labels":{"argocd-agent-addon.open-cluster-management.io/argocd-components":"Existing"}}}`,
	} {
		if err := patch(manager, body); err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: allowed (%v)", name, err)
		}
	}
	// Anyone else is not bound by it.
	if err := patch(admin, `{"metadata":{"labels":{"env":"dev"}}}`); err != nil {
		t.Errorf("the admin was refused: %v", err)
	}
}

// appSetController gives the ApplicationSet controller in ns the Role and RoleBinding of the
// paired Argo CD release's install, and returns its identity once the authorizer applies them.
func appSetController(t *testing.T, c client.Client, ns string) testenv.Identity {
	t.Helper()
	objs, err := spoke.Objects(addon.ModeAutonomous)
	if err != nil {
		t.Fatal(err)
	}
	const name = "argocd-applicationset-controller"
	var upstream []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetName() == name && (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") {
			upstream = append(upstream, o)
		}
	}
	var rbac []client.Object
	for _, o := range testenv.ArgoCDInNamespace(ns, upstream) {
		rbac = append(rbac, o)
	}
	if len(rbac) != 2 {
		t.Fatalf("found %d of the Role and RoleBinding %s in Argo CD's install", len(rbac), name)
	}
	id := testenv.ServiceAccount(ns, name)
	create := authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "argoproj.io", Resource: "applications"}
	if err := testenv.Grant(context.Background(), c, id, []authorizationv1.ResourceAttributes{create}, rbac...); err != nil {
		t.Fatal(err)
	}
	return id
}
