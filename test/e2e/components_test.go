package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
)

// Names of the components scenario: its own GitOpsCluster and Placement, on cluster2.
const (
	componentsCluster   = "cluster2"
	componentsGOC       = "argocd-components-e2e"
	componentsPlacement = "argocd-components-e2e"
	componentsApp       = "guestbook-components"
	componentsAppNS     = "guestbook-components"
)

// testArgoCDComponents installs an autonomous-mode GitOpsCluster with the default
// argoCDComponents (Install) on cluster2 and follows what OCM's real work agent applies
// there: the Argo CD CRDs become Established; the application-controller, repo-server and
// redis objects of the core install of the default pair's Argo CD release are in the agent
// namespace, owned by the work; the redis password Secret is made
// on the cluster by redis's init container; every object the agent Deployment names exists;
// the Argo CD pods become ready and every Service there reaches a ready pod; the agent pod's
// cert-reloader runs while argocd-agent, on the agents' default image, waits for an image (this
// GitOpsCluster names none; see docs/local-fleet.md to import the real one). Then those Argo CD
// pods sync an Application created in the agent namespace, where argocd-agent puts the
// Applications the principal sends. Deleting the GitOpsCluster removes what the addon installed
// but the CRDs, which are orphaned.
func testArgoCDComponents(t *testing.T, s *suite) {
	c2 := s.spokes[componentsCluster]
	ctx := ctxFor(t)

	s.labelClusters(t)
	pl := &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: componentsPlacement},
		Spec:       clusterv1beta1.PlacementSpec{Predicates: placementPredicates([]string{componentsCluster})},
	}
	goc := &v1alpha1.GitOpsCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: componentsGOC},
		Spec: v1alpha1.GitOpsClusterSpec{
			PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: componentsPlacement},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{
				Mode:                   v1alpha1.AgentModeAutonomous,
				PrincipalServerAddress: "127.0.0.1",
				PrincipalServerPort:    &intstr.IntOrString{Type: intstr.Int, IntVal: 443},
			},
		},
	}
	for _, o := range []client.Object{pl, goc} {
		if err := s.hub.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { s.removeComponentsGitOpsCluster(t, goc, pl) })

	// 1. Applied by OCM's work agent on cluster2.
	start := time.Now()
	for _, crd := range []string{"applications.argoproj.io", "appprojects.argoproj.io", "applicationsets.argoproj.io"} {
		s.eventually(t, componentsCluster+": CRD "+crd+" Established", 3*time.Minute, func(ctx context.Context) (bool, string) {
			return crdEstablished(ctx, c2, crd)
		})
	}
	t.Logf("%-72s %7s", componentsCluster+": Argo CD CRDs Established after the GitOpsCluster was created", time.Since(start).Round(10*time.Millisecond))
	workloads := []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-application-controller"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-repo-server"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-redis"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-applicationset-controller"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-redis"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-repo-server"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-cm"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-redis"}},
	}
	s.eventually(t, componentsCluster+": Argo CD workloads applied and owned by the work", 3*time.Minute, func(ctx context.Context) (bool, string) {
		var missing []string
		for _, o := range workloads {
			if err := c2.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				missing = append(missing, fmt.Sprintf("%T %s: %v", o, o.GetName(), err))
			} else if !ownedByAppliedManifestWork(o) {
				missing = append(missing, fmt.Sprintf("%T %s: no AppliedManifestWork owner", o, o.GetName()))
			}
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	})
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c2.Get(ctx, client.ObjectKey{Name: "applications.argoproj.io"}, crd); err != nil {
		t.Fatal(err)
	}
	if ownedByAppliedManifestWork(crd) {
		t.Errorf("CRD applications.argoproj.io is owned by the work: removing the addon would delete every Application")
	}
	// Autonomous mode carries the ApplicationSet CRD (about 341 KB): OCM's addon manager spreads
	// the components over several ManifestWorks, each under the work webhook's 500 KiB.
	works := &workv1.ManifestWorkList{}
	if err := s.hub.List(ctx, works, client.InNamespace(componentsCluster)); err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for _, w := range works.Items {
		if !strings.HasPrefix(w.Name, "addon-"+addonName+"-argocd-deploy-") {
			continue
		}
		total := 0
		for _, m := range w.Spec.Workload.Manifests {
			total += len(m.Raw)
		}
		sizes = append(sizes, fmt.Sprintf("%s %d manifests %d bytes", w.Name, len(w.Spec.Workload.Manifests), total))
		if total > 500*1024 {
			t.Errorf("ManifestWork %s holds %d bytes, over OCM's limit", w.Name, total)
		}
	}
	t.Logf("%s: Argo CD components in %d ManifestWorks: %s", componentsCluster, len(sizes), strings.Join(sizes, "; "))
	if len(sizes) < 2 {
		t.Errorf("the components fit one ManifestWork (%v): the split is not exercised", sizes)
	}

	// 2. The redis password, made on the cluster by the redis pod's init container (argocd
	// admin redis-initial-password, as the argocd-redis ServiceAccount).
	redis := &corev1.Secret{}
	s.eventually(t, componentsCluster+": the redis pod's init container made the redis password", 6*time.Minute, func(ctx context.Context) (bool, string) {
		err := c2.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: addon.RedisSecretName}, redis)
		return err == nil, getState(err, "Secret "+addon.RedisSecretName) + "\n" + nodeapps.PodReport(ctx, s.f, componentsCluster, agentNS)
	})
	if len(redis.Data[addon.RedisSecretKey]) < 16 {
		t.Errorf("%s/%s has no usable %s key", agentNS, addon.RedisSecretName, addon.RedisSecretKey)
	}

	// 3. Everything the agent Deployment names exists.
	s.eventually(t, componentsCluster+": every object the agent Deployment references exists", 3*time.Minute, func(ctx context.Context) (bool, string) {
		d, err := s.agentDeployment(ctx, componentsCluster)
		if err != nil {
			return false, getState(err, "agent Deployment")
		}
		missing := missingReferences(ctx, c2, d)
		return len(missing) == 0, "missing: " + strings.Join(missing, ", ")
	})

	// 3b. Argo CD's configuration is set on the hub: a change of the GitOpsCluster's
	// argoCDConfig reaches the cluster's argocd-cm, and the install's other keys stay.
	cm0 := &corev1.ConfigMap{}
	if err := c2.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "argocd-cm"}, cm0); err != nil {
		t.Fatal(err)
	}
	cur := &v1alpha1.GitOpsCluster{}
	if err := s.hub.Get(ctx, client.ObjectKeyFromObject(goc), cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Spec.ArgoCDAgentAddon.ArgoCDConfig = &v1alpha1.ArgoCDConfig{ArgoCDCM: map[string]string{"statusbadge.enabled": "true"}}
	if err := s.hub.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, componentsCluster+": a setting made on the hub in the cluster's argocd-cm", 2*time.Minute, func(ctx context.Context) (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c2.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "argocd-cm"}, cm); err != nil {
			return false, err.Error()
		}
		for k, v := range cm0.Data {
			if cm.Data[k] != v {
				return false, "the install's key " + k + " changed"
			}
		}
		return cm.Data["statusbadge.enabled"] == "true", fmt.Sprintf("data keys %v", mapsKeys(cm.Data))
	})
	// And for this cluster alone (clusterArgoCDConfig): OCM's addon-manager renders the
	// cluster's own template, which its ManagedClusterAddOn names, over the GitOpsCluster's.
	if err := s.hub.Get(ctx, client.ObjectKeyFromObject(goc), cur); err != nil {
		t.Fatal(err)
	}
	base = cur.DeepCopy()
	cur.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig = []v1alpha1.ClusterArgoCDConfig{{ClusterName: componentsCluster,
		ArgoCDConfig: v1alpha1.ArgoCDConfig{ArgoCDCM: map[string]string{"ui.bannercontent": componentsCluster}}}}
	if err := s.hub.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, componentsCluster+": a setting made on the hub for this cluster alone, over the GitOpsCluster's", 2*time.Minute, func(ctx context.Context) (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c2.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "argocd-cm"}, cm); err != nil {
			return false, err.Error()
		}
		return cm.Data["ui.bannercontent"] == componentsCluster && cm.Data["statusbadge.enabled"] == "true", fmt.Sprintf("data %v", cm.Data)
	})

	// 4. What the addon runs there runs as pods: Argo CD's, reachable through its Services, and
	// the agent's cert-reloader, beside argocd-agent waiting for its image.
	s.eventually(t, componentsCluster+": the agent pod's cert-reloader runs, argocd-agent waits for its image", 4*time.Minute, func(ctx context.Context) (bool, string) {
		return nodeapps.AgentWaitsForItsImage(ctx, s.f, componentsCluster, agentNS, spoke.RewriteRegistry(version.DefaultAgentImage, s.f.RegistryHost()))
	})

	// 5. Argo CD's controllers on what the addon installed sync an Application put into the
	// agent namespace.
	repo, sha := s.gitRepo(t, "git-components", "guestbook", fleet.GuestbookFiles(1, s.guestbookImg1))
	argo, err := s.f.StartArgoCD(ctx, componentsCluster, fleet.ArgoCDOptions{
		Namespace: agentNS, Installed: true,
		ArgoCDCM: map[string]string{"timeout.reconciliation": reconciliation.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	var services []string
	s.eventually(t, componentsCluster+": every Service of the components reaches a ready pod", 2*time.Minute, func(ctx context.Context) (bool, string) {
		ok, checked, state := nodeapps.ServicesReachPods(ctx, s.f, componentsCluster, agentNS, nil)
		services = checked
		return ok, state
	})
	t.Logf("%s: Services with ready pods: %v", componentsCluster, services)
	app := fleet.NewApplication(componentsApp, agentNS, repo.URL, "guestbook", componentsAppNS)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		errs := []error{client.IgnoreNotFound(c2.Delete(ctx, app)), argo.Stop(),
			client.IgnoreNotFound(c2.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: componentsAppNS}}))}
		if err := errors.Join(errs...); err != nil {
			t.Errorf("cleaning up Argo CD: %v", err)
		}
	})
	if err := c2.Create(ctx, app); err != nil {
		t.Fatalf("creating the Application: %v", err)
	}
	s.eventually(t, componentsCluster+": Application synced by the spoke's application-controller", 3*time.Minute, func(ctx context.Context) (bool, string) {
		st, err := fleet.GetApplicationState(ctx, c2, agentNS, componentsApp)
		if err != nil {
			return false, getState(err, "Application")
		}
		d := &appsv1.Deployment{}
		if err := c2.Get(ctx, client.ObjectKey{Namespace: componentsAppNS, Name: guestbookName}, d); err != nil {
			return false, getState(err, "Deployment") + "; Application: " + st.String()
		}
		if done, state := checkGuestbook(d, 1, s.guestbookImg1); !done {
			return false, state
		}
		return st.Sync == "Synced" && st.Health == "Healthy" && st.Revision == sha, st.String()
	})
}

// removeComponentsGitOpsCluster deletes the scenario's GitOpsCluster and Placement and checks
// that the addon took away what it installed on the cluster, except the orphaned CRDs.
func (s *suite) removeComponentsGitOpsCluster(t *testing.T, goc *v1alpha1.GitOpsCluster, pl *clusterv1beta1.Placement) {
	ctx := ctxFor(t)
	for _, o := range []client.Object{goc, pl} {
		if err := client.IgnoreNotFound(s.hub.Delete(ctx, o)); err != nil {
			t.Errorf("deleting %s: %v", o.GetName(), err)
		}
	}
	c2 := s.spokes[componentsCluster]
	s.eventually(t, componentsCluster+": Argo CD workloads and the agent removed with the GitOpsCluster", 3*time.Minute, func(ctx context.Context) (bool, string) {
		var left []string
		for _, o := range []client.Object{
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-application-controller"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-repo-server"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: addon.AgentName}},
		} {
			if err := c2.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
				left = append(left, o.GetName())
			}
		}
		return len(left) == 0, "still there: " + strings.Join(left, ", ")
	})
	if ok, state := crdEstablished(ctx, c2, "applications.argoproj.io"); !ok {
		t.Errorf("%s: the Application CRD should stay after the addon is removed: %s", componentsCluster, state)
	}
}

func crdEstablished(ctx context.Context, c client.Client, name string) (bool, string) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return false, getState(err, "CRD")
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		if cond["type"] == "Established" {
			return cond["status"] == "True", fmt.Sprintf("Established=%v", cond["status"])
		}
	}
	return false, "no Established condition"
}

// missingReferences lists the ServiceAccount, Secrets, ConfigMaps (and keys) and Services the
// pod template of d names that do not exist in its namespace.
func missingReferences(ctx context.Context, c client.Client, d *appsv1.Deployment) []string {
	spec := d.Spec.Template.Spec
	var missing []string
	check := func(what string, obj client.Object, key string, data func() map[string]bool) {
		obj.SetNamespace(d.Namespace)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			missing = append(missing, fmt.Sprintf("%s %s (%v)", what, obj.GetName(), err))
			return
		}
		if key != "" && !data()[key] {
			missing = append(missing, fmt.Sprintf("%s %s key %s", what, obj.GetName(), key))
		}
	}
	secret := func(name, key string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}
		check("Secret", s, key, func() map[string]bool { return keys(s.Data) })
	}
	configMap := func(name, key string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		check("ConfigMap", cm, key, func() map[string]bool { return keys(cm.Data) })
	}
	check("ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: spec.ServiceAccountName}}, "", nil)
	for _, v := range spec.Volumes {
		switch {
		case v.Secret != nil:
			secret(v.Secret.SecretName, "")
		case v.ConfigMap != nil:
			configMap(v.ConfigMap.Name, "")
		}
	}
	for _, ctr := range append(spec.InitContainers, spec.Containers...) {
		for _, e := range ctr.Env {
			switch {
			case e.ValueFrom == nil:
			case e.ValueFrom.SecretKeyRef != nil:
				secret(e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
			case e.ValueFrom.ConfigMapKeyRef != nil:
				configMap(e.ValueFrom.ConfigMapKeyRef.Name, e.ValueFrom.ConfigMapKeyRef.Key)
			}
		}
		for _, a := range ctr.Args {
			// --root-ca-secret-name=<secret>, --redis-addr=<service>:<port>
			if v, ok := strings.CutPrefix(a, "--root-ca-secret-name="); ok {
				secret(v, addon.SpokeCASecretKey)
			}
			if v, ok := strings.CutPrefix(a, "--redis-addr="); ok {
				host, _, _ := strings.Cut(v, ":")
				check("Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: host}}, "", nil)
			}
		}
	}
	sort.Strings(missing)
	return missing
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// testArgoCDComponentsClusterLabel: cluster1 already runs its own Argo CD in the agent namespace
// (its argocd-cm stands for it) and its ManagedCluster is labelled
// argocd-components=Existing before a GitOpsCluster that installs the components selects it.
// OCM installs the agent there, and, through the
// components' Placement, which leaves labelled clusters out, nothing of Argo CD's: OCM never makes
// the components' ManagedClusterAddOn there, the user's argocd-cm is never taken over, changed or
// deleted, no repo-server appears, and after the GitOpsCluster goes the user's objects remain.
func testArgoCDComponentsClusterLabel(t *testing.T, s *suite) {
	const cluster, name = "cluster1", "argocd-components-label-e2e"
	c1 := s.spokes[cluster]
	ctx := ctxFor(t)

	s.labelClusters(t)
	setLabel := func(ctx context.Context, value string) { s.setComponentsLabel(ctx, t, cluster, value) }
	setLabel(ctx, string(v1alpha1.ArgoCDComponentsExisting))
	if err := client.IgnoreAlreadyExists(c1.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}})); err != nil {
		t.Fatal(err)
	}
	userCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-cm"}, Data: map[string]string{"installed-by": "the cluster's own admin"}}
	// An earlier scenario's Argo CD may have left its argocd-cm in this namespace: the user's
	// replaces it.
	if err := client.IgnoreNotFound(c1.Delete(ctx, userCM.DeepCopy())); err != nil {
		t.Fatal(err)
	}
	if err := c1.Create(ctx, userCM); err != nil {
		t.Fatal(err)
	}
	pl := &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       clusterv1beta1.PlacementSpec{Predicates: placementPredicates([]string{cluster})},
	}
	goc := &v1alpha1.GitOpsCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.GitOpsClusterSpec{
			PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: name},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{
				PrincipalServerAddress: "127.0.0.1",
				PrincipalServerPort:    &intstr.IntOrString{Type: intstr.Int, IntVal: 443},
			},
		},
	}
	for _, o := range []client.Object{pl, goc} {
		if err := s.hub.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, o := range []client.Object{goc, pl} {
			_ = client.IgnoreNotFound(s.hub.Delete(ctx, o))
		}
		_ = client.IgnoreNotFound(c1.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-cm"}}))
		setLabel(ctx, "")
	})

	// The user's ConfigMap is watched the whole time: one look at it owned or changed fails.
	untouched := func(ctx context.Context) string {
		cm := &corev1.ConfigMap{}
		if err := c1.Get(ctx, client.ObjectKeyFromObject(userCM), cm); err != nil {
			return "the user's argocd-cm: " + err.Error()
		}
		if ownedByAppliedManifestWork(cm) || cm.Data["installed-by"] != "the cluster's own admin" || len(cm.Data) != 1 {
			return fmt.Sprintf("the user's argocd-cm was taken over: owners %v, data %v", cm.OwnerReferences, cm.Data)
		}
		err := c1.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "argocd-repo-server"}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			return "a repo-server Deployment was applied: " + getState(err, "Deployment")
		}
		err = s.hub.Get(ctx, client.ObjectKey{Namespace: cluster, Name: addonName + "-argocd"}, &addonv1alpha1.ManagedClusterAddOn{})
		if !apierrors.IsNotFound(err) {
			return "OCM made the components' ManagedClusterAddOn: " + getState(err, "ManagedClusterAddOn")
		}
		return ""
	}
	var broken string
	componentsPlacement := "argocd-components-" + name
	s.eventually(t, cluster+": agent installed; the components' Placement decided without it", 3*time.Minute, func(ctx context.Context) (bool, string) {
		if b := untouched(ctx); b != "" && broken == "" {
			broken = b
		}
		if _, err := s.agentDeployment(ctx, cluster); err != nil {
			return false, getState(err, "agent Deployment")
		}
		list := &clusterv1beta1.PlacementDecisionList{}
		if err := s.hub.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1beta1.PlacementLabel: componentsPlacement}); err != nil {
			return false, err.Error()
		}
		if len(list.Items) == 0 {
			return false, "no PlacementDecision of " + componentsPlacement + " yet"
		}
		for _, d := range list.Items {
			for _, c := range d.Status.Decisions {
				if c.ClusterName == cluster {
					broken = componentsPlacement + " selects " + cluster
				}
			}
		}
		return true, ""
	})
	// Some more time for a late apply to show.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && broken == "" {
		broken = untouched(ctx)
		time.Sleep(500 * time.Millisecond)
	}
	if broken != "" {
		t.Errorf("%s: %s", cluster, broken)
	}

	if err := s.hub.Delete(ctx, goc); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, cluster+": agent removed with the GitOpsCluster", 3*time.Minute, func(ctx context.Context) (bool, string) {
		_, err := s.agentDeployment(ctx, cluster)
		return apierrors.IsNotFound(err), getState(err, "agent Deployment")
	})
	if b := untouched(ctx); b != "" {
		t.Errorf("%s after the GitOpsCluster's deletion: %s", cluster, b)
	}
}

// testForeignArgoCDIsLeftAlone: cluster1 runs its own Argo CD, a newer release (the fleet's
// v3.6.1, installed from its install.yaml) with an edited argocd-cm, in the namespace the
// components would go to. A GitOpsCluster with the default argoCDComponents (Install) selects
// it, without the opt-out label: the probe (read-only, applied by OCM's real work agent) finds
// that Argo CD, the GitOpsCluster names the cluster and what it found, the agent is installed,
// and nothing of the cluster's Argo CD is ever owned, changed or downgraded. The user then
// chooses Existing for the cluster, and the report clears.
func testForeignArgoCDIsLeftAlone(t *testing.T, s *suite) {
	const cluster, name = "cluster1", "foreign-argocd-e2e"
	c1 := s.spokes[cluster]
	ctx := ctxFor(t)
	s.labelClusters(t)

	// The cluster admin's kubectl apply of install.yaml: Argo CD runs as pods.
	theirs, err := s.f.StartArgoCD(ctx, cluster, fleet.ArgoCDOptions{Namespace: agentNS, ArgoCDCM: map[string]string{"timeout.reconciliation": "300s"}})
	if err != nil {
		t.Fatal(err)
	}
	// Later scenarios run their own Argo CD in this namespace.
	t.Cleanup(func() {
		if err := theirs.Stop(); err != nil {
			t.Errorf("stopping the cluster's own Argo CD: %v", err)
		}
	})
	untouched := func(ctx context.Context) string {
		cm := &corev1.ConfigMap{}
		if err := c1.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "argocd-cm"}, cm); err != nil {
			return "the cluster's argocd-cm: " + err.Error()
		}
		if ownedByAppliedManifestWork(cm) || cm.Data["timeout.reconciliation"] != "300s" || cm.Labels[spoke.LabelInstalledBy] != "" {
			return fmt.Sprintf("the cluster's argocd-cm was taken over: owners %v, labels %v, data %v", cm.OwnerReferences, cm.Labels, cm.Data)
		}
		sts := &appsv1.StatefulSet{}
		if err := c1.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "argocd-application-controller"}, sts); err != nil {
			return "the cluster's application-controller: " + err.Error()
		}
		if img := sts.Spec.Template.Spec.Containers[0].Image; ownedByAppliedManifestWork(sts) || !strings.HasSuffix(img, ":v3.6.1") {
			return fmt.Sprintf("the cluster's application-controller was taken over: owners %v, image %s", sts.OwnerReferences, img)
		}
		err := s.hub.Get(ctx, client.ObjectKey{Namespace: cluster, Name: addonName + "-argocd"}, &addonv1alpha1.ManagedClusterAddOn{})
		if !apierrors.IsNotFound(err) {
			return "OCM made the components' ManagedClusterAddOn: " + getState(err, "ManagedClusterAddOn")
		}
		return ""
	}
	if b := untouched(ctx); b != "" {
		t.Fatalf("before the GitOpsCluster: %s", b)
	}
	pl := &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       clusterv1beta1.PlacementSpec{Predicates: placementPredicates([]string{cluster})},
	}
	goc := &v1alpha1.GitOpsCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.GitOpsClusterSpec{
			PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: name},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{
				PrincipalServerAddress: "127.0.0.1",
				PrincipalServerPort:    &intstr.IntOrString{Type: intstr.Int, IntVal: 443},
			},
		},
	}
	for _, o := range []client.Object{pl, goc} {
		if err := s.hub.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	setLabel := func(ctx context.Context, value string) { s.setComponentsLabel(ctx, t, cluster, value) }
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, o := range []client.Object{goc, pl} {
			_ = client.IgnoreNotFound(s.hub.Delete(ctx, o))
		}
		setLabel(ctx, "")
	})

	var broken string
	check := func(ctx context.Context) {
		if b := untouched(ctx); b != "" && broken == "" {
			broken = b
		}
	}
	// install.yaml's image, behind the fleet's registry as behind a user's mirror.
	theirImage := spoke.RewriteRegistry("quay.io/argoproj/argocd:v3.6.1", s.f.RegistryHost())
	s.eventually(t, cluster+": the GitOpsCluster reports the cluster's own Argo CD v3.6.1", 3*time.Minute, func(ctx context.Context) (bool, string) {
		check(ctx)
		g := &v1alpha1.GitOpsCluster{}
		if err := s.hub.Get(ctx, client.ObjectKeyFromObject(goc), g); err != nil {
			return false, err.Error()
		}
		found := len(g.Status.ForeignArgoCD) == 1 && g.Status.ForeignArgoCD[0].Cluster == cluster &&
			strings.Contains(g.Status.ForeignArgoCD[0].Found, "StatefulSet "+agentNS+"/argocd-application-controller ("+theirImage+")")
		return found && meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionForeignArgoCD), fmt.Sprintf("foreign %+v, probing %d", g.Status.ForeignArgoCD, g.Status.ProbingClusters)
	})
	s.eventually(t, cluster+": the agent installed beside it", 3*time.Minute, func(ctx context.Context) (bool, string) {
		check(ctx)
		_, err := s.agentDeployment(ctx, cluster)
		return err == nil, getState(err, "agent Deployment")
	})
	// Some more time for a late apply to show.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && broken == "" {
		check(ctx)
		time.Sleep(500 * time.Millisecond)
	}
	if broken != "" {
		t.Fatalf("%s: %s", cluster, broken)
	}

	// The user's choice for this cluster: keep its Argo CD.
	setLabel(ctx, string(v1alpha1.ArgoCDComponentsExisting))
	s.eventually(t, "hub: the report clears once the cluster is labelled Existing; the version skew is shown", 2*time.Minute, func(ctx context.Context) (bool, string) {
		check(ctx)
		g := &v1alpha1.GitOpsCluster{}
		if err := s.hub.Get(ctx, client.ObjectKeyFromObject(goc), g); err != nil {
			return false, err.Error()
		}
		// The Argo CD it keeps is another release than the agent's: reported as such.
		skew := len(g.Status.OtherArgoCDVersions) == 1 && strings.Contains(g.Status.OtherArgoCDVersions[0].Found, "Argo CD v3.6.1")
		return meta.IsStatusConditionFalse(g.Status.Conditions, v1alpha1.ConditionForeignArgoCD) && g.Status.ExistingArgoCDClusters == 1 && skew,
			fmt.Sprintf("conditions %v, other versions %+v", g.Status.Conditions, g.Status.OtherArgoCDVersions)
	})
	if err := s.hub.Delete(ctx, goc); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, cluster+": agent removed with the GitOpsCluster", 3*time.Minute, func(ctx context.Context) (bool, string) {
		_, err := s.agentDeployment(ctx, cluster)
		return apierrors.IsNotFound(err), getState(err, "agent Deployment")
	})
	if b := untouched(ctx); b != "" || broken != "" {
		t.Errorf("%s: %s %s", cluster, broken, b)
	}
}

// setComponentsLabel sets (or, with "", removes) a ManagedCluster's argocd-components label, as
// a hub admin may.
func (s *suite) setComponentsLabel(ctx context.Context, t *testing.T, cluster, value string) {
	t.Helper()
	mc := &clusterv1.ManagedCluster{}
	if err := s.hub.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
		t.Fatal(err)
	}
	base := mc.DeepCopy()
	if value == "" {
		delete(mc.Labels, v1alpha1.LabelArgoCDComponents)
	} else {
		mc.Labels[v1alpha1.LabelArgoCDComponents] = value
	}
	if err := s.hub.Patch(ctx, mc, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}
