package gitopscluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/finalizers"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// finalize removes what this GitOpsCluster created: its CMA entry (and the CMA when no entry
// is left), its template, its ADC and its cluster secrets. The Placement, the hub PKI shared
// with the principal, and anything the user made stay.
func (r *Reconciler) finalize(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	if !controllerutil.ContainsFinalizer(goc, v1alpha1.Finalizer) {
		return nil
	}
	events, err := r.revoker().RevokeOwnedAgents(ctx, goc)
	r.emit(goc, events)
	if err != nil {
		return err
	}
	if err := r.addOns().ReleaseEntries(ctx, goc); err != nil {
		return err
	}
	for _, name := range []string{r.Config.AddonName, config.ComponentsAddonName(r.Config.AddonName)} {
		if err := r.deleteEmptyCMA(ctx, name); err != nil {
			return err
		}
	}

	if err := r.addOns().Components().DeleteComponentsPlacement(ctx, goc); err != nil {
		return err
	}
	if err := r.probes().DropClearance(ctx, goc); err != nil {
		return err
	}
	if err := r.probes().DeleteProbes(ctx, goc); err != nil {
		return err
	}
	owner := client.MatchingLabels{v1alpha1.LabelOwnerNamespace: goc.Namespace, v1alpha1.LabelOwnerName: goc.Name}
	var templates addonv1alpha1.AddOnTemplateList
	if err := r.Client.List(ctx, &templates, owner); err != nil {
		return err
	}
	for i := range templates.Items {
		if err := r.Client.Delete(ctx, &templates.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	var adcs addonv1alpha1.AddOnDeploymentConfigList
	if err := r.Client.List(ctx, &adcs, client.InNamespace(goc.Namespace), owner); err != nil {
		return err
	}
	for i := range adcs.Items {
		if err := r.Client.Delete(ctx, &adcs.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	// Outside the managed namespaces the manager wrote nothing (and its cache cannot list there).
	if principalNS := names.PrincipalNamespace(goc); r.Config.NamespaceManaged(principalNS) {
		var secrets corev1.SecretList
		if err := r.Client.List(ctx, &secrets, client.InNamespace(principalNS), owner); err != nil {
			return err
		}
		for i := range secrets.Items {
			if err := r.Client.Delete(ctx, &secrets.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return finalizers.Remove(ctx, r.Client, goc, v1alpha1.Finalizer)
}

// deleteEmptyCMA deletes the ClusterManagementAddOn of that name if it is ours and lists no
// placement any more.
func (r *Reconciler) deleteEmptyCMA(ctx context.Context, name string) error {
	cma := &addonv1alpha1.ClusterManagementAddOn{}
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	if err := reader.Get(ctx, types.NamespacedName{Name: name}, cma); err != nil {
		return client.IgnoreNotFound(err)
	}
	if len(cma.Spec.InstallStrategy.Placements) == 0 && names.ManagedByUs(cma) {
		// Only the object we saw empty: another GitOpsCluster may be adding its entry.
		pre := client.Preconditions{ResourceVersion: &cma.ResourceVersion}
		if err := r.Client.Delete(ctx, cma, pre); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
