package addonobjects

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

// addOnTemplatesConfig is the config kind OCM reads an addon's AddOnTemplate from.
var addOnTemplatesConfig = addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: "addontemplates"}

// ClusterConfigs is the outcome of applyClusterConfigs.
type ClusterConfigs struct {
	// templates are the per-cluster templates in use; the caller keeps them.
	templates sets.Set[string]
	// unselected are clusters with an entry that this GitOpsCluster does not select.
	unselected []string
	// heldByOthers are clusters whose ManagedClusterAddOn already names an AddOnTemplate that
	// is not this GitOpsCluster's (a hub admin's own override): left as they are.
	heldByOthers []string
}

// applyClusterConfigs gives each selected cluster that has an entry in clusterArgoCDConfig a
// components AddOnTemplate of its own (base, the GitOpsCluster's template, with the cluster's
// keys on top) and names it in the cluster's components ManagedClusterAddOn, which OCM reads
// before the ClusterManagementAddOn's default. A ManagedClusterAddOn that names this
// GitOpsCluster's template for a cluster without an entry any more is given the default back.
// owned nil (selection unknown) writes the templates and changes no ManagedClusterAddOn.
func (w *Writer) applyClusterConfigs(ctx context.Context, goc *v1alpha1.GitOpsCluster, base *addonv1alpha1.AddOnTemplate, owned sets.Set[string]) (ClusterConfigs, error) {
	out := ClusterConfigs{templates: sets.New[string]()}
	wanted := map[string]string{}
	for i := range goc.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig {
		entry := &goc.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig[i]
		if owned != nil && !owned.Has(entry.ClusterName) {
			out.unselected = append(out.unselected, entry.ClusterName)
			continue
		}
		tmpl := base.DeepCopy()
		tmpl.Name = names.ComponentsClusterTemplateName(goc, entry.ClusterName)
		tmpl.Annotations = map[string]string{v1alpha1.AnnotationConfigCluster: entry.ClusterName}
		if err := spoke.ApplyConfigMapData(tmpl.Spec.AgentSpec.Workload.Manifests, configData(&entry.ArgoCDConfig)); err != nil {
			return out, fmt.Errorf("cluster %s: %w", entry.ClusterName, err)
		}
		if err := w.writeTemplate(ctx, goc, tmpl); err != nil {
			return out, err
		}
		out.templates.Insert(tmpl.Name)
		wanted[entry.ClusterName] = tmpl.Name
	}
	if owned == nil || w.ComponentsAddOns == nil {
		return out, nil
	}
	var mcas addonv1alpha1.ManagedClusterAddOnList
	// Read-only walk over every cluster's components addon: no copies of the cache's objects.
	if err := w.ComponentsAddOns.List(ctx, &mcas, client.UnsafeDisableDeepCopy); err != nil {
		return out, err
	}
	for i := range mcas.Items {
		mca := &mcas.Items[i]
		want, current := wanted[mca.Namespace], templateConfig(mca)
		switch {
		case current == want: // none wanted and none named, or already this cluster's
			continue
		case want != "" && current != "": // want is never another's name, so current is
			out.heldByOthers = append(out.heldByOthers, mca.Namespace)
			continue
		case want == "" && current != names.ComponentsClusterTemplateName(goc, mca.Namespace): // not ours to remove
			continue
		}
		if err := w.setTemplateConfig(ctx, mca, want); err != nil {
			return out, err
		}
	}
	sort.Strings(out.heldByOthers)
	return out, nil
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

// setTemplateConfig names template in the ManagedClusterAddOn's configs ("" removes the entry),
// keeping every other config a hub admin set there. mca is the cache's object and is not changed.
func (w *Writer) setTemplateConfig(ctx context.Context, mca *addonv1alpha1.ManagedClusterAddOn, template string) error {
	live := mca.DeepCopy()
	configs := live.Spec.Configs[:0:0]
	for _, c := range live.Spec.Configs {
		if c.ConfigGroupResource != addOnTemplatesConfig {
			configs = append(configs, c)
		}
	}
	if template != "" {
		configs = append(configs, addonv1alpha1.AddOnConfig{ConfigGroupResource: addOnTemplatesConfig, ConfigReferent: addonv1alpha1.ConfigReferent{Name: template}})
	}
	live.Spec.Configs = configs
	if err := w.Client.Patch(ctx, live, client.MergeFromWithOptions(mca, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("naming the cluster's AddOnTemplate in ManagedClusterAddOn %s/%s: %w", mca.Namespace, mca.Name, err)
	}
	return nil
}

// Notes says, for the AddOnConfigured condition, which entries of clusterArgoCDConfig are not
// in effect and why; "" when all are.
func (c ClusterConfigs) Notes() string {
	var s string
	if len(c.unselected) > 0 {
		s += "; clusterArgoCDConfig names clusters this GitOpsCluster does not select (unused): " + fleet.Summarize(c.unselected)
	}
	if len(c.heldByOthers) > 0 {
		s += "; clusterArgoCDConfig not applied where the components ManagedClusterAddOn already names another AddOnTemplate (remove that config to use this one): " + fleet.Summarize(c.heldByOthers)
	}
	return s
}
