package addonobjects

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

// addOnTemplatesConfig and deploymentConfigsConfig are the config kinds OCM reads an addon's
// AddOnTemplate and AddOnDeploymentConfig from.
var (
	addOnTemplatesConfig    = addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: addon.ResourceAddOnTemplates}
	deploymentConfigsConfig = addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: addon.ResourceAddOnDeploymentConfigs}
)

// ClusterConfigs is the outcome of applyClusterConfigs.
type ClusterConfigs struct {
	// templates are the per-cluster templates in use; the caller keeps them.
	templates sets.Set[string]
	// unselected are clusters with an entry that this GitOpsCluster does not select.
	unselected []string
	// heldByOthers are clusters whose ManagedClusterAddOn already names an AddOnTemplate that
	// is not this GitOpsCluster's (a hub admin's own override): left as they are.
	heldByOthers []string
	// mirrorsHeldByOthers are clusters with image mirrors whose ManagedClusterAddOn already
	// names an AddOnDeploymentConfig that is not this GitOpsCluster's.
	mirrorsHeldByOthers []string
	// userIDsNote says why userIDs: Auto cannot tell the clusters that report OpenShift.
	userIDsNote string
	// pairNote says that the agent image is no supported release (reportUnpairedAgent), and
	// pairEvents are the Event that calls for when the image has just become such.
	pairNote   string
	pairEvents []config.Event
}

// clusterWant is what one cluster's components ManagedClusterAddOn names itself: an
// AddOnTemplate and an AddOnDeploymentConfig (in the GitOpsCluster's namespace), "" for the
// ClusterManagementAddOn entry's.
type clusterWant struct {
	template, config string
}

// applyClusterConfigs gives each selected cluster that has an entry in clusterArgoCDConfig a
// components AddOnTemplate of its own (the GitOpsCluster's template, or its template without
// UIDs for a cluster that reports OpenShift, with the cluster's keys on top), the other
// clusters that report OpenShift the template without UIDs (openshift.go), and each selected
// cluster whose image mirrors move an image an AddOnDeploymentConfig of its own (mirrors.go),
// and names them in the cluster's components
// ManagedClusterAddOn, which OCM reads before the ClusterManagementAddOn's default. A
// ManagedClusterAddOn that names this GitOpsCluster's template or config for a cluster that
// no longer needs one is given the default back. owned nil (selection unknown) writes the
// templates and changes no ManagedClusterAddOn.
func (comp Components) applyClusterConfigs(ctx context.Context, goc *v1alpha1.GitOpsCluster, tmpls componentsTemplates, shared *addonv1alpha1.AddOnDeploymentConfig, owned sets.Set[string]) (ClusterConfigs, error) {
	out := ClusterConfigs{templates: sets.New[string]()}
	var mcas addonv1alpha1.ManagedClusterAddOnList
	if comp.ComponentsAddOns != nil {
		// Read-only walk over every cluster's components addon: no copies of the cache's objects.
		if err := comp.ComponentsAddOns.List(ctx, &mcas, client.UnsafeDisableDeepCopy); err != nil {
			return out, err
		}
	}
	assigned, note, err := comp.assignedClusters(ctx, goc, mcas.Items)
	if err != nil {
		return out, err
	}
	out.userIDsNote = note
	var assignedBase *addonv1alpha1.AddOnTemplate
	baseFor := func(cluster string) (*addonv1alpha1.AddOnTemplate, error) {
		if !assigned.Has(cluster) {
			return tmpls.base, nil
		}
		if assignedBase == nil {
			if assignedBase, err = tmpls.assigned(); err != nil {
				return nil, err
			}
		}
		return assignedBase, nil
	}
	wanted := map[string]clusterWant{}
	for i := range goc.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig {
		entry := &goc.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig[i]
		if owned != nil && !owned.Has(entry.ClusterName) {
			out.unselected = append(out.unselected, entry.ClusterName)
			continue
		}
		base, err := baseFor(entry.ClusterName)
		if err != nil {
			return out, err
		}
		tmpl := base.DeepCopy()
		// base may have just been created, which filled in what the API server set.
		tmpl.ObjectMeta = metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}
		tmpl.Name = names.ComponentsClusterTemplateName(goc, entry.ClusterName)
		metav1.SetMetaDataAnnotation(&tmpl.ObjectMeta, v1alpha1.AnnotationConfigCluster, entry.ClusterName)
		if err := spoke.ApplyConfigMapData(tmpl.Spec.AgentSpec.Workload.Manifests, configData(&entry.ArgoCDConfig)); err != nil {
			return out, fmt.Errorf("cluster %s: %w", entry.ClusterName, err)
		}
		if err := comp.writeTemplate(ctx, goc, tmpl); err != nil {
			return out, err
		}
		out.templates.Insert(tmpl.Name)
		wanted[entry.ClusterName] = clusterWant{template: tmpl.Name}
	}
	// The clusters that report OpenShift and have no template of their own share one.
	for _, c := range sets.List(assigned) {
		if _, own := wanted[c]; own || owned != nil && !owned.Has(c) {
			continue
		}
		base, err := baseFor(c)
		if err != nil {
			return out, err
		}
		if !out.templates.Has(base.Name) {
			if err := comp.writeTemplate(ctx, goc, base); err != nil {
				return out, err
			}
			out.templates.Insert(base.Name)
		}
		wanted[c] = clusterWant{template: base.Name}
	}
	if owned == nil || comp.ComponentsAddOns == nil {
		return out, nil
	}
	mirrored, err := comp.mirroredConfigs(ctx, goc, shared, owned)
	if err != nil {
		return out, err
	}
	for c, name := range mirrored {
		cw := wanted[c]
		cw.config = name
		wanted[c] = cw
	}
	// The configs the ManagedClusterAddOns name once this pass is done, or OCM still renders.
	named := sets.New[string]()
	for i := range mcas.Items {
		mca := &mcas.Items[i]
		want := wanted[mca.Namespace]
		tmpl, tmplHeld := decideConfig(want.template, templateConfig(mca), func(name string) bool {
			return name == names.ComponentsClusterTemplateName(goc, mca.Namespace) || name == AssignedTemplateName(goc)
		})
		if tmplHeld {
			out.heldByOthers = append(out.heldByOthers, mca.Namespace)
		}
		var cfg *string
		cfgHeld := want.config != ""
		if current, ok := deploymentConfig(mca, goc.Namespace); ok {
			cfg, cfgHeld = decideConfig(want.config, current, func(name string) bool { return strings.HasPrefix(name, DeploymentConfigPrefix(goc)) })
			if cfg != nil {
				current = *cfg
			}
			named.Insert(current)
		}
		named.Insert(configsInStatus(mca, goc.Namespace)...)
		if cfgHeld {
			out.mirrorsHeldByOthers = append(out.mirrorsHeldByOthers, mca.Namespace)
		}
		if tmpl == nil && cfg == nil {
			continue
		}
		if err := comp.setConfigs(ctx, mca, goc.Namespace, tmpl, cfg); err != nil {
			return out, err
		}
	}
	if err := comp.deleteUnusedMirroredConfigs(ctx, goc, shared.Name, named.Insert(slices.Collect(maps.Values(mirrored))...)); err != nil {
		return out, err
	}
	sort.Strings(out.heldByOthers)
	sort.Strings(out.mirrorsHeldByOthers)
	return out, nil
}

// decideConfig says what one config kind of a ManagedClusterAddOn must become: nil to leave
// it, else the name to set ("" removes it). current is what it names ("" none); ours tells
// this GitOpsCluster's names from a hub admin's, which are never replaced (held reports a
// wanted change that one keeps from being made).
func decideConfig(want, current string, ours func(string) bool) (change *string, held bool) {
	switch {
	case current == want:
		return nil, false
	case current != "" && !ours(current):
		return nil, want != ""
	}
	return &want, false
}

// templateConfig is the AddOnTemplate a ManagedClusterAddOn names in its own configs, "" if none.
func templateConfig(mca *addonv1alpha1.ManagedClusterAddOn) string {
	for _, c := range mca.Spec.Configs {
		if c.ConfigGroupResource == addOnTemplatesConfig {
			return c.Name
		}
	}
	return ""
}

// deploymentConfig is the AddOnDeploymentConfig a ManagedClusterAddOn names in its own configs
// ("" if none); ok is false when what it names could not be one of this GitOpsCluster's (in
// another namespace, or more than one).
func deploymentConfig(mca *addonv1alpha1.ManagedClusterAddOn, ns string) (name string, ok bool) {
	n := 0
	for _, c := range mca.Spec.Configs {
		if c.ConfigGroupResource == deploymentConfigsConfig {
			n++
			name, ok = c.Name, c.Namespace == ns
		}
	}
	if n > 1 {
		return name, false
	}
	return name, n == 0 || ok
}

// setConfigs names template and config (in namespace ns) in the ManagedClusterAddOn's configs,
// each only when not nil ("" removes that kind's entry), keeping every other config a hub
// admin set there. mca is the cache's object and is not changed.
func (comp Components) setConfigs(ctx context.Context, mca *addonv1alpha1.ManagedClusterAddOn, ns string, template, config *string) error {
	live := mca.DeepCopy()
	configs := live.Spec.Configs[:0:0]
	for _, c := range live.Spec.Configs {
		if template != nil && c.ConfigGroupResource == addOnTemplatesConfig || config != nil && c.ConfigGroupResource == deploymentConfigsConfig {
			continue
		}
		configs = append(configs, c)
	}
	if template != nil && *template != "" {
		configs = append(configs, addonv1alpha1.AddOnConfig{ConfigGroupResource: addOnTemplatesConfig, ConfigReferent: addonv1alpha1.ConfigReferent{Name: *template}})
	}
	if config != nil && *config != "" {
		configs = append(configs, addonv1alpha1.AddOnConfig{ConfigGroupResource: deploymentConfigsConfig, ConfigReferent: addonv1alpha1.ConfigReferent{Namespace: ns, Name: *config}})
	}
	live.Spec.Configs = configs
	if err := comp.Client.Patch(ctx, live, client.MergeFromWithOptions(mca, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("naming the cluster's own configs in ManagedClusterAddOn %s/%s: %w", mca.Namespace, mca.Name, err)
	}
	return nil
}

// Notes says, for the AddOnConfigured condition, which entries of clusterArgoCDConfig are not
// in effect and why, and when the components are not the agent image's own pair; "" when
// nothing is amiss.
func (c ClusterConfigs) Notes() string {
	s := c.pairNote
	if len(c.unselected) > 0 {
		s += "; clusterArgoCDConfig names clusters this GitOpsCluster does not select (unused): " + ownership.Summarize(c.unselected)
	}
	if len(c.heldByOthers) > 0 {
		s += "; clusterArgoCDConfig not applied where the components ManagedClusterAddOn already names another AddOnTemplate (remove that config to use this one): " + ownership.Summarize(c.heldByOthers)
	}
	s += c.userIDsNote
	if len(c.mirrorsHeldByOthers) > 0 {
		s += "; image mirrors not applied to the Argo CD components' StatefulSet and init containers where the components ManagedClusterAddOn already names another AddOnDeploymentConfig (remove that config to use the cluster's own): " + ownership.Summarize(c.mirrorsHeldByOthers)
	}
	return s
}
