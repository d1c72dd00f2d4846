package gitopscluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

var componentsAddon = config.ComponentsAddonName(addonName)

func componentsEntry(t *testing.T, ns, placement string) (*addonv1alpha1.PlacementStrategy, error) {
	t.Helper()
	cma := &addonv1alpha1.ClusterManagementAddOn{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: componentsAddon}, cma); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	for i, p := range cma.Spec.InstallStrategy.Placements {
		if p.Namespace == ns && p.Name == placement {
			return &cma.Spec.InstallStrategy.Placements[i], nil
		}
	}
	return nil, nil
}

func configName(p addonv1alpha1.PlacementStrategy, resource string) string {
	for _, c := range p.Configs {
		if c.Resource == resource {
			return c.Name
		}
	}
	return ""
}

func manifestNames(t *testing.T, tpl *addonv1alpha1.AddOnTemplate) []string {
	t.Helper()
	var out []string
	for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
		var o struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := json.Unmarshal(m.Raw, &o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Kind+"/"+o.Metadata.Name)
	}
	return out
}

func adcVariables(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	adc := &addonv1alpha1.AddOnDeploymentConfig{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, adc); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, v := range adc.Spec.CustomizedVariables {
		vars[v.Name] = v.Value
	}
	return vars
}

// By default the Argo CD components go through their own addon, with the same Placement, config
// and rollout strategy as the agent.
func TestArgoCDComponentsInstalledByDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "components-default"
	createNamespace(t, ns)
	createManagedClusters(t, "cd-c1")
	createPlacement(t, ns, "pl")
	setDecisions(t, ns, "pl", 1, "cd-c1")
	createGitOpsCluster(t, ns, "fleet", "pl", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.Mode = v1alpha1.AgentModeAutonomous
	})
	conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)

	goc := getGOC(t, ns, "fleet")
	var entry *addonv1alpha1.PlacementStrategy
	eventually(t, "the components addon lists the components' Placement", func() (err error) {
		if entry, err = componentsEntry(t, ns, names.ComponentsPlacementName(goc)); err == nil && entry == nil {
			err = fmt.Errorf("no entry")
		}
		return err
	})
	agentEntry := cmaEntries(t)[ns+"/pl"]
	if got, want := configName(*entry, addon.ResourceAddOnTemplates), names.ComponentsTemplateName(goc); got != want {
		t.Errorf("components entry names template %q, want %q", got, want)
	}
	if got, want := configName(*entry, addon.ResourceAddOnDeploymentConfigs), configName(agentEntry, addon.ResourceAddOnDeploymentConfigs); got != want || got == "" {
		t.Errorf("components entry names config %q, the agent's %q: they must share it", got, want)
	}
	tpl := &addonv1alpha1.AddOnTemplate{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: names.ComponentsTemplateName(goc)}, tpl); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(manifestNames(t, tpl), " ")
	for _, want := range []string{"CustomResourceDefinition/applicationsets.argoproj.io", "StatefulSet/argocd-application-controller",
		"Deployment/argocd-redis", "Deployment/argocd-repo-server", "Deployment/argocd-applicationset-controller"} {
		if !strings.Contains(got, want) {
			t.Errorf("components template lacks %s: %s", want, got)
		}
	}
	if len(tpl.Spec.Registration) != 0 {
		t.Errorf("the components template registers %v: OCM would mount the agent's certificate into Argo CD's pods", tpl.Spec.Registration)
	}
	vars := adcVariables(t, ns, goc.Status.AddOnDeploymentConfig)
	// The manager's default agent image is the default pair's agent.
	if vars[addon.VarArgoCDImage] != "quay.io/argoproj/argocd:"+version.Default().ArgoCD || !strings.Contains(vars[addon.VarRedisImage], "redis") {
		t.Errorf("config variables %v lack the default pair's Argo CD images", vars)
	}
	agentTpl := &addonv1alpha1.AddOnTemplate{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: goc.Status.AddOnTemplate}, agentTpl); err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(manifestNames(t, agentTpl), " "); strings.Contains(s, "CustomResourceDefinition") || strings.Contains(s, "argocd-repo-server") {
		t.Errorf("the agent's template carries Argo CD components: %s", s)
	}

	// Deleting the GitOpsCluster removes the components template and its (last) CMA.
	if err := k8s.Delete(ctx, goc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "components template and addon removed", func() error {
		if err := k8s.Get(ctx, types.NamespacedName{Name: names.ComponentsTemplateName(goc)}, &addonv1alpha1.AddOnTemplate{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("template still there (%v)", err)
		}
		if e, err := componentsEntry(t, ns, names.ComponentsPlacementName(goc)); err != nil || e != nil {
			return fmt.Errorf("entry still there (%v)", err)
		}
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.ComponentsPlacementName(goc)}, &clusterv1beta1.Placement{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the components' Placement is still there (%v)", err)
		}
		return nil
	})
}

// A GitOpsCluster that uses the clusters' own Argo CD writes nothing of Argo CD's: no components
// template, no entry on the components addon, no Argo CD images in the config; switching an
// installing GitOpsCluster to Existing removes what it installed and leaves the agent as it was.
func TestExistingArgoCDIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "components-existing"
	createNamespace(t, ns)
	createManagedClusters(t, "ce-c1")
	createPlacement(t, ns, "pl")
	setDecisions(t, ns, "pl", 1, "ce-c1")
	createGitOpsCluster(t, ns, "own", "pl", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.ArgoCDComponents = v1alpha1.ArgoCDComponentsExisting
	})
	conditionIs(t, ns, "own", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
	goc := getGOC(t, ns, "own")
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.ComponentsPlacementName(goc)}, &clusterv1beta1.Placement{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a components Placement exists (%v)", err)
	}
	if e, err := componentsEntry(t, ns, names.ComponentsPlacementName(goc)); err != nil || e != nil {
		t.Fatalf("the components addon lists the Placement of a GitOpsCluster that uses the existing Argo CD (%v)", err)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Name: names.ComponentsTemplateName(goc)}, &addonv1alpha1.AddOnTemplate{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a components template exists (%v)", err)
	}
	for k := range adcVariables(t, ns, goc.Status.AddOnDeploymentConfig) {
		if k == addon.VarArgoCDImage || k == addon.VarRedisImage {
			t.Errorf("config carries %s", k)
		}
	}

	// The same GitOpsCluster switched to Install and back.
	patch := func(c v1alpha1.ArgoCDComponents) {
		t.Helper()
		g := getGOC(t, ns, "own")
		base := g.DeepCopy()
		g.Spec.ArgoCDAgentAddon.ArgoCDComponents = c
		if err := k8s.Patch(ctx, g, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	patch(v1alpha1.ArgoCDComponentsInstall)
	eventually(t, "components installed", func() error {
		if e, err := componentsEntry(t, ns, names.ComponentsPlacementName(goc)); err != nil || e == nil {
			return fmt.Errorf("no entry (%v)", err)
		}
		return k8s.Get(ctx, types.NamespacedName{Name: names.ComponentsTemplateName(goc)}, &addonv1alpha1.AddOnTemplate{})
	})
	agentTpl := &addonv1alpha1.AddOnTemplate{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: goc.Status.AddOnTemplate}, agentTpl); err != nil {
		t.Fatal(err)
	}
	patch(v1alpha1.ArgoCDComponentsExisting)
	eventually(t, "components removed", func() error {
		if e, err := componentsEntry(t, ns, names.ComponentsPlacementName(goc)); err != nil || e != nil {
			return fmt.Errorf("entry still there (%v)", err)
		}
		if err := k8s.Get(ctx, types.NamespacedName{Name: names.ComponentsTemplateName(goc)}, &addonv1alpha1.AddOnTemplate{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("template still there (%v)", err)
		}
		return nil
	})
	after := &addonv1alpha1.AddOnTemplate{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: goc.Status.AddOnTemplate}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != agentTpl.ResourceVersion {
		t.Errorf("the agent's template was rewritten when the components were switched")
	}
	if _, ok := cmaEntries(t)[ns+"/pl"]; !ok {
		t.Errorf("the agent's CMA entry went with the components'")
	}
}

func TestArgoCDComponentsRejectsUnknownValues(t *testing.T) {
	t.Parallel()
	ns := "components-invalid"
	createNamespace(t, ns)
	g := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}}
	g.Spec.PlacementRef.Name = "pl"
	g.Spec.ArgoCDAgentAddon.ArgoCDComponents = "Operator"
	err := k8s.Create(context.Background(), g)
	if err == nil || !strings.Contains(err.Error(), "argoCDComponents") {
		t.Fatalf("create with argoCDComponents=Operator: %v, want a validation error naming the field", err)
	}
}

// One registry setting moves every image run on the clusters, and the pull secrets reach every
// pod of both templates.
func TestSpokeRegistryAndPullSecrets(t *testing.T) {
	ctx := context.Background()
	ns := "components-mirror"
	createNamespace(t, ns)
	createManagedClusters(t, "cm-c1")
	createPlacement(t, ns, "pl")
	setDecisions(t, ns, "pl", 1, "cm-c1")
	stopManager()
	startManagerWith(func(o *manager.Options) {
		o.Fleet.SpokeImageRegistry = "mirror.example.com:5000"
		o.Fleet.SpokeImagePullSecrets = []string{"regcred"}
	})
	defer func() { stopManager(); startManager() }()
	createGitOpsCluster(t, ns, "fleet", "pl", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
	goc := getGOC(t, ns, "fleet")

	vars := adcVariables(t, ns, goc.Status.AddOnDeploymentConfig)
	for _, v := range []string{addon.VarAgentImage, addon.VarReloaderImage, addon.VarArgoCDImage, addon.VarRedisImage} {
		if !strings.HasPrefix(vars[v], "mirror.example.com:5000/") {
			t.Errorf("%s = %q, not from the mirror", v, vars[v])
		}
	}
	if vars[addon.VarArgoCDImage] != "mirror.example.com:5000/argoproj/argocd:"+version.Default().ArgoCD {
		t.Errorf("Argo CD image %q", vars[addon.VarArgoCDImage])
	}
	for _, name := range []string{goc.Status.AddOnTemplate, names.ComponentsTemplateName(goc)} {
		tpl := &addonv1alpha1.AddOnTemplate{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: name}, tpl); err != nil {
			t.Fatal(err)
		}
		pods := 0
		for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
			var o struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct {
							ImagePullSecrets []struct{ Name string }
						}
					}
				}
			}
			if err := json.Unmarshal(m.Raw, &o); err != nil {
				t.Fatal(err)
			}
			if o.Kind != "Deployment" && o.Kind != "StatefulSet" {
				continue
			}
			pods++
			if ps := o.Spec.Template.Spec.ImagePullSecrets; len(ps) != 1 || ps[0].Name != "regcred" {
				t.Errorf("template %s: a %s pulls with %v", name, o.Kind, ps)
			}
		}
		if pods == 0 {
			t.Errorf("template %s has no workload", name)
		}
	}
}

// The components addon shares the agent's AddOnDeploymentConfig and rolls out on its own: an old
// config stays while a components ManagedClusterAddOn still runs it, even when every agent moved.
func TestOldConfigKeptWhileTheComponentsStillUseIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "components-rollout"
	createNamespace(t, ns)
	createManagedClusters(t, "cr2-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "cr2-1")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	var oldName string
	eventually(t, "a config", func() error {
		if oldName = getGOC(t, ns, "fleet").Status.AddOnDeploymentConfig; oldName == "" {
			return fmt.Errorf("no config yet")
		}
		return nil
	})
	createComponentsMCA(t, "cr2-1")
	setComponentsMCAConfig(t, "cr2-1", ns, oldName)
	setMCAConfig(t, "cr2-1", ns, oldName)

	g := getGOC(t, ns, "fleet")
	base := g.DeepCopy()
	g.Spec.ArgoCDAgentAddon.Image = "quay.io/argoprojlabs/argocd-agent:v0.9.1"
	if err := k8s.Patch(ctx, g, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	var newName string
	eventually(t, "a new config", func() error {
		if newName = getGOC(t, ns, "fleet").Status.AddOnDeploymentConfig; newName == oldName {
			return fmt.Errorf("still %s", newName)
		}
		return nil
	})
	setMCAConfig(t, "cr2-1", ns, newName)
	// The agent moved; the components have not: the old config must stay.
	// Long enough for the pass the addon's change wakes, after OCMStatusSettle.
	consistently(t, "old config kept while the components use it", gitopscluster.OCMStatusSettle+3*time.Second, func() error {
		return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: oldName}, &addonv1alpha1.AddOnDeploymentConfig{})
	})
	setComponentsMCAConfig(t, "cr2-1", ns, newName)
	eventually(t, "old config pruned once the components moved", func() error {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: oldName}, &addonv1alpha1.AddOnDeploymentConfig{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

func setComponentsMCAConfig(t *testing.T, cluster, ns, adcName string) {
	t.Helper()
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: cluster, Name: componentsAddon}, mca); err != nil {
		t.Fatal(err)
	}
	spec := &addonv1alpha1.ConfigSpecHash{ConfigReferent: addonv1alpha1.ConfigReferent{Namespace: ns, Name: adcName}, SpecHash: "test"}
	mca.Status.ConfigReferences = []addonv1alpha1.ConfigReference{{
		ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: "addon.open-cluster-management.io", Resource: "addondeploymentconfigs"},
		ConfigReferent:      spec.ConfigReferent,
		DesiredConfig:       spec,
		LastAppliedConfig:   spec.DeepCopy(),
	}}
	if err := k8s.Status().Update(context.Background(), mca); err != nil {
		t.Fatal(err)
	}
}

// createComponentsMCA stands in for OCM's addon-manager, which creates the components addon's
// ManagedClusterAddOn on every cluster of its placements.
func createComponentsMCA(t *testing.T, cluster string) {
	t.Helper()
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: componentsAddon}}
	if err := k8s.Create(context.Background(), mca); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
