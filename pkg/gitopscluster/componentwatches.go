package gitopscluster

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/addonobjects"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/namespaceindex"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/warmcache"
)

// addOns is the writer of the OCM addon objects, over this reconciler's clients, config and
// components addon cache.
func (r *Reconciler) addOns() *addonobjects.Writer {
	return &addonobjects.Writer{Hub: r.hub(), ComponentsAddOns: r.ComponentsAddOns}
}

// probes is the prober of the selected clusters' own Argo CD and keeper of their clearance,
// over the same, and this reconciler's probes in flight.
func (r *Reconciler) probes() *addonobjects.Prober {
	return &addonobjects.Prober{Hub: r.hub(), ComponentsAddOns: r.ComponentsAddOns, ProbesInFlight: &r.probesInFlight}
}

// newComponentsAddOnCache caches the ManagedClusterAddOns of the components addon only; the
// manager's own cache holds those of the agent's addon (a field selector takes one name).
func newComponentsAddOnCache(mgr ctrl.Manager, addonName string) (cache.Cache, error) {
	return cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&addonv1alpha1.ManagedClusterAddOn{}: {Field: fields.OneTermEqualSelector("metadata.name", config.ComponentsAddonName(addonName))},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
		// One per cluster namespace, only ever listed cluster-wide.
		NewInformer: namespaceindex.Without(&addonv1alpha1.ManagedClusterAddOn{}),
	})
}

// watchComponents adds the watches the components addon needs: its ManagedClusterAddOns (new
// ones, and their rollout, which holds configs in use), and of ManagedClusters the opt-out label and the image mirrors
// (a cluster's own components config follows them).
func (r *Reconciler) watchComponents(mgr ctrl.Manager, b *builder.Builder) (*builder.Builder, error) {
	wk := r.wakes()
	if r.ComponentsAddOns == nil {
		c, err := newComponentsAddOnCache(mgr, r.Config.AddonName)
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(c); err != nil {
			return nil, err
		}
		// Its one informer starts with the cache, and the manager is ready once it has synced.
		if err := warmcache.Warm(context.Background(), mgr, "components-addon-cache", c, &addonv1alpha1.ManagedClusterAddOn{}); err != nil {
			return nil, err
		}
		r.ComponentsAddOns = c
	}
	return b.
		// A components addon's creation wakes the GitOpsClusters of its cluster: OCM creates it
		// whenever it pleases, maybe after their last pass, and a cluster with a configuration of
		// its own (clusterArgoCDConfig, image mirrors, OpenShift) must be pointed at it then.
		// After that, its rollout holds configs in use.
		WatchesRawSource(source.Kind[client.Object](r.ComponentsAddOns, &addonv1alpha1.ManagedClusterAddOn{},
			settled(wk.selectorsOfClusterNamespace, ocmStatusSettle), predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return true },
				UpdateFunc: func(e event.UpdateEvent) bool {
					o, n := e.ObjectOld.(*addonv1alpha1.ManagedClusterAddOn), e.ObjectNew.(*addonv1alpha1.ManagedClusterAddOn)
					return !equality.Semantic.DeepEqual(o.Status.ConfigReferences, n.Status.ConfigReferences)
				},
				DeleteFunc:  func(event.DeleteEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(wk.selectorsOfCluster), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return e.Object.GetLabels()[v1alpha1.LabelArgoCDComponents] != "" },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetLabels()[v1alpha1.LabelArgoCDComponents] != e.ObjectNew.GetLabels()[v1alpha1.LabelArgoCDComponents] ||
					imageRegistriesChanged(e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})), nil
}

// imageRegistriesChanged reports whether an update changed OCM's image-registries annotation,
// which a ManagedClusterImageRegistry writes without touching anything else of the cluster.
func imageRegistriesChanged(old, updated client.Object) bool {
	return old.GetAnnotations()[clusterv1.ClusterImageRegistriesAnnotationKey] != updated.GetAnnotations()[clusterv1.ClusterImageRegistriesAnnotationKey]
}

// watchProbes wakes the GitOpsClusters of a cluster when its probe's status changes, after
// ocmStatusSettle.
func (r *Reconciler) watchProbes(b *builder.Builder) *builder.Builder {
	wk := r.wakes()
	return b.Watches(&workv1.ManifestWork{}, settled(wk.selectorsOfProbedCluster, ocmStatusSettle), builder.WithPredicates(predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*workv1.ManifestWork), e.ObjectNew.(*workv1.ManifestWork)
			return !equality.Semantic.DeepEqual(o.Status, n.Status)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}))
}
