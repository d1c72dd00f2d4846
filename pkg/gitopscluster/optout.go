package gitopscluster

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

// One template renders the same objects on every cluster, so a cluster that keeps its own Argo CD
// while its GitOpsCluster installs the components is told apart on its ManagedClusterAddOn of
// the components addon: OCM lets a ManagedClusterAddOn's spec.configs override the placement's
// configs, and the override names a template of the GitOpsCluster that installs nothing of
// Argo CD's. The agent's addon is not touched. Clusters leave the override when the label goes.

// newComponentsAddOnCache caches the ManagedClusterAddOns of the components addon only; the
// manager's own cache holds those of the agent's addon (a field selector takes one name).
func newComponentsAddOnCache(mgr ctrl.Manager, addonName string) (cache.Cache, error) {
	return cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&addonv1alpha1.ManagedClusterAddOn{}: {Field: fields.OneTermEqualSelector("metadata.name", ComponentsAddonName(addonName))},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
}

// watchClusterOptOuts adds the watches the components addon needs: its ManagedClusterAddOns (OCM
// creates one when a labelled cluster joins; their rollout holds configs in use) and the label.
func (r *Reconciler) watchClusterOptOuts(mgr ctrl.Manager, b *builder.Builder) (*builder.Builder, error) {
	if r.ComponentsAddOns == nil {
		c, err := newComponentsAddOnCache(mgr, r.Config.AddonName)
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(c); err != nil {
			return nil, err
		}
		r.ComponentsAddOns = c
	}
	return b.
		WatchesRawSource(source.Kind[client.Object](r.ComponentsAddOns, &addonv1alpha1.ManagedClusterAddOn{},
			handler.EnqueueRequestsFromMapFunc(r.forManagedClusterAddOn), predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return true },
				// spec: the override; configReferences: a rollout moving, which may free an old config.
				UpdateFunc: func(e event.UpdateEvent) bool {
					o, n := e.ObjectOld.(*addonv1alpha1.ManagedClusterAddOn), e.ObjectNew.(*addonv1alpha1.ManagedClusterAddOn)
					return !equality.Semantic.DeepEqual(o.Spec, n.Spec) || !equality.Semantic.DeepEqual(o.Status.ConfigReferences, n.Status.ConfigReferences)
				},
				DeleteFunc:  func(event.DeleteEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.forManagedCluster), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return e.Object.GetLabels()[v1alpha1.LabelArgoCDComponents] != "" },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetLabels()[v1alpha1.LabelArgoCDComponents] != e.ObjectNew.GetLabels()[v1alpha1.LabelArgoCDComponents]
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})), nil
}

// forManagedCluster wakes the GitOpsClusters selecting the cluster, as forManagedClusterAddOn
// does for the cluster a ManagedClusterAddOn lives in.
func (r *Reconciler) forManagedCluster(ctx context.Context, o client.Object) []reconcile.Request {
	return r.forManagedClusterAddOn(ctx, &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetName()}})
}

// applyClusterOptOuts points the components addon of every selected cluster labelled
// LabelArgoCDComponents=Existing at the GitOpsCluster's no-components template, and takes the
// override back from the others. It returns how many selected clusters keep their own Argo CD.
// Reads are cached; a ManagedClusterAddOn is written only when its override must change.
func (r *Reconciler) applyClusterOptOuts(ctx context.Context, goc *v1alpha1.GitOpsCluster, selected sets.Set[string]) (int32, error) {
	if r.ComponentsAddOns == nil {
		return 0, nil
	}
	name := names.ExistingArgoCDTemplateName(goc)
	optOut := sets.New[string]()
	if componentsWanted(goc) {
		var labelled clusterv1.ManagedClusterList
		if err := r.Client.List(ctx, &labelled, client.MatchingLabels{v1alpha1.LabelArgoCDComponents: string(v1alpha1.ArgoCDComponentsExisting)}); err != nil {
			return 0, err
		}
		for _, mc := range labelled.Items {
			if selected.Has(mc.Name) {
				optOut.Insert(mc.Name)
			}
		}
	}
	if optOut.Len() > 0 {
		if err := r.writeExistingTemplate(ctx, goc, name); err != nil {
			return 0, err
		}
	}
	var mcas addonv1alpha1.ManagedClusterAddOnList
	if err := r.ComponentsAddOns.List(ctx, &mcas); err != nil {
		return 0, err
	}
	for i := range mcas.Items {
		mca := &mcas.Items[i]
		if !selected.Has(mca.Namespace) {
			continue
		}
		want := optOut.Has(mca.Namespace)
		has := slices.ContainsFunc(mca.Spec.Configs, func(c addonv1alpha1.AddOnConfig) bool { return isOverride(c, name) })
		if want == has {
			continue
		}
		patch := client.MergeFromWithOptions(mca.DeepCopy(), client.MergeFromWithOptimisticLock{})
		mca.Spec.Configs = slices.DeleteFunc(mca.Spec.Configs, func(c addonv1alpha1.AddOnConfig) bool { return isOverride(c, name) })
		if want {
			mca.Spec.Configs = append(mca.Spec.Configs, addonv1alpha1.AddOnConfig{
				ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: addon.ResourceAddOnTemplates},
				ConfigReferent:      addonv1alpha1.ConfigReferent{Name: name},
			})
		}
		if err := r.Client.Patch(ctx, mca, patch); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("setting the Argo CD components of cluster %s: %w", mca.Namespace, err)
		}
	}
	if optOut.Len() == 0 {
		if err := r.deleteOwnedTemplate(ctx, goc, name); err != nil {
			return 0, err
		}
	}
	return int32(optOut.Len()), nil
}

func isOverride(c addonv1alpha1.AddOnConfig, template string) bool {
	return c.Group == addonv1alpha1.GroupName && c.Resource == addon.ResourceAddOnTemplates && c.Name == template
}

func (r *Reconciler) writeExistingTemplate(ctx context.Context, goc *v1alpha1.GitOpsCluster, name string) error {
	tmpl, err := spoke.BuildExistingArgoCDTemplate(name, ComponentsAddonName(r.Config.AddonName))
	if err != nil {
		return err
	}
	return r.writeTemplate(ctx, goc, tmpl)
}
