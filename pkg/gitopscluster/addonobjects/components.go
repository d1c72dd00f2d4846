package addonobjects

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

// The Argo CD components go to the clusters through an addon of their own (config.ComponentsAddonName),
// listing the same Placement, AddOnDeploymentConfig and rollout strategy as the agent's addon:
//   - OCM mounts a CustomSigner registration's client certificate into every Deployment of a
//     template, so components in the agent's template would carry the agent's private key into
//     the repo-server, which runs the tools of every repository it renders;
//   - a GitOpsCluster that uses the clusters' existing Argo CD simply has no entry there, and
//     removing the entry uninstalls the components without touching the agent.

// componentsWanted reports whether the GitOpsCluster installs the Argo CD components.
func componentsWanted(goc *v1alpha1.GitOpsCluster) bool {
	return goc.Spec.ArgoCDAgentAddon.ArgoCDComponents != v1alpha1.ArgoCDComponentsExisting
}

// spokeImages are the images of the Argo CD release paired with agentImage's release, from the
// configured registry.
func (w *Writer) spokeImages(agentImage string) (spoke.Images, error) {
	imgs, err := spoke.ImagesFor(agentImage)
	if err != nil {
		return spoke.Images{}, err
	}
	return spoke.Images{
		ArgoCD: spoke.RewriteRegistry(imgs.ArgoCD, w.Config.SpokeImageRegistry),
		Redis:  spoke.RewriteRegistry(imgs.Redis, w.Config.SpokeImageRegistry),
	}, nil
}

func (comp Components) componentsCMA() *addonv1alpha1.ClusterManagementAddOn {
	cma := addon.BuildClusterManagementAddOn(config.ComponentsAddonName(comp.Config.AddonName), "argocd-components")
	cma.Spec.AddOnMeta.Description = "Installs, beside each argocd-agent agent, the Argo CD components it drives (" + spoke.Source() + ")."
	return cma
}

// applyComponents writes the components template and this GitOpsCluster's entry of the
// components addon, or removes both when the clusters' existing Argo CD is to be used. It
// reports waiting while the entry keeps naming the user's Placement (see below).
func (comp Components) applyComponents(ctx context.Context, goc *v1alpha1.GitOpsCluster, mode string, adc *addonv1alpha1.AddOnDeploymentConfig, rollout clusterv1alpha1.RolloutStrategy, owned sets.Set[string]) (bool, ClusterConfigs, error) {
	cma := comp.componentsCMA()
	name := names.ComponentsTemplateName(goc)
	if !componentsWanted(goc) {
		if err := comp.applyCMAEntryTo(ctx, goc, cma, "", nil); err != nil {
			return false, ClusterConfigs{}, fmt.Errorf("releasing ClusterManagementAddOn %s: %w", cma.Name, err)
		}
		if err := comp.DeleteComponentsPlacement(ctx, goc); err != nil {
			return false, ClusterConfigs{}, err
		}
		if err := comp.DeleteOpenShiftPlacement(ctx, goc); err != nil {
			return false, ClusterConfigs{}, err
		}
		return false, ClusterConfigs{}, comp.deleteOwnedTemplate(ctx, goc, name)
	}
	var cfg ClusterConfigs
	// Every components template of the GitOpsCluster is built for the pair of the agent image
	// its shared config names, so that the manifests and the images variables agree.
	agentImage := addon.Variable(adc, addon.VarAgentImage)
	tmpl, err := comp.componentsTemplate(goc, name, cma.Name, mode, agentImage, goc.Spec.ArgoCDAgentAddon.UserIDs == v1alpha1.UserIDsAssigned)
	if err != nil {
		return false, cfg, err
	}
	if err := comp.writeTemplate(ctx, goc, tmpl); err != nil {
		return false, cfg, err
	}
	tmpls := componentsTemplates{base: tmpl, assigned: func() (*addonv1alpha1.AddOnTemplate, error) {
		return comp.componentsTemplate(goc, AssignedTemplateName(goc), cma.Name, mode, agentImage, true)
	}}
	if cfg, err = comp.applyClusterConfigs(ctx, goc, tmpls, adc, owned); err != nil {
		return false, cfg, err
	}
	cfg.pairNote, cfg.pairEvents = comp.reportUnpairedAgent(ctx, goc, agentImage)
	placement, err := comp.applyComponentsPlacement(ctx, goc)
	if err != nil {
		return false, cfg, err
	}
	// Earlier versions installed by the user's Placement when it had numberOfClusters. OCM
	// removes the addon from every cluster its entry's Placement does not decide, so the entry
	// moves to the copy only once the copy decides every cluster that has the components.
	if waiting, err := comp.copyBehind(ctx, goc, cma.Name, placement); err != nil || waiting {
		return waiting, cfg, err
	}
	entry := addon.BuildPlacementStrategy(types.NamespacedName{Namespace: goc.Namespace, Name: placement}, tmpl.Name, types.NamespacedName{Namespace: adc.Namespace, Name: adc.Name}, rollout)
	if err := comp.applyCMAEntryTo(ctx, goc, cma, placement, &entry); err != nil {
		return false, cfg, fmt.Errorf("writing ClusterManagementAddOn %s: %w", cma.Name, err)
	}
	return false, cfg, nil
}

// componentsTemplate builds the GitOpsCluster's components template named name, of the Argo CD
// release paired with agentImage's; assigned leaves the user IDs to the platform.
func (comp Components) componentsTemplate(goc *v1alpha1.GitOpsCluster, name, addonName, mode, agentImage string, assigned bool) (*addonv1alpha1.AddOnTemplate, error) {
	tmpl, err := spoke.BuildAddOnTemplate(spoke.Input{
		TemplateName: name, AddonName: addonName, Mode: mode, AgentImage: agentImage,
		ImagePullSecrets: comp.Config.SpokeImagePullSecrets, AssignedUserIDs: assigned,
	})
	if err != nil {
		return nil, fmt.Errorf("building the Argo CD components AddOnTemplate: %w", err)
	}
	if err := addon.ApplyPodSettings(tmpl.Spec.AgentSpec.Workload.Manifests, podSettings(goc)); err != nil {
		return nil, fmt.Errorf("placing the Argo CD components' pods: %w", err)
	}
	if err := spoke.ApplyConfigMapData(tmpl.Spec.AgentSpec.Workload.Manifests, configData(goc.Spec.ArgoCDAgentAddon.ArgoCDConfig)); err != nil {
		return nil, err
	}
	if assigned && autoUserIDs(goc) {
		tmpl.Annotations = map[string]string{v1alpha1.AnnotationUserIDs: string(v1alpha1.UserIDsAssigned)}
	}
	return tmpl, nil
}

// componentsTemplates are the GitOpsCluster's components templates: its own, and the one whose
// pods name no UID for the clusters that report OpenShift (userIDs: Auto), built on first use.
type componentsTemplates struct {
	base     *addonv1alpha1.AddOnTemplate
	assigned func() (*addonv1alpha1.AddOnTemplate, error)
}

// copyBehind reports whether the components addon's entry still names the user's Placement
// while the copy (placement) decides fewer clusters than carry the clearance label.
func (comp Components) copyBehind(ctx context.Context, goc *v1alpha1.GitOpsCluster, cmaName, placement string) (bool, error) {
	if placement == goc.Spec.PlacementRef.Name {
		return false, nil
	}
	live := &addonv1alpha1.ClusterManagementAddOn{}
	if err := comp.Client.Get(ctx, types.NamespacedName{Name: cmaName}, live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	onUsers := false
	for _, p := range live.Spec.InstallStrategy.Placements {
		if p.PlacementRef.Namespace == goc.Namespace && p.PlacementRef.Name == goc.Spec.PlacementRef.Name {
			onUsers = true
		}
	}
	if !onUsers {
		return false, nil
	}
	var cleared clusterv1.ManagedClusterList
	if err := comp.Client.List(ctx, &cleared, client.UnsafeDisableDeepCopy, client.HasLabels{names.ComponentsClearedLabel(goc)}); err != nil {
		return false, err
	}
	decided, _, err := ownership.SelectedClustersAndPages(ctx, comp.Client, goc.Namespace, placement)
	if err != nil {
		return false, err
	}
	for _, mc := range cleared.Items {
		if !decided.Has(mc.Name) {
			return true, nil
		}
	}
	return false, nil
}

// writeTemplate writes one of goc's AddOnTemplates with its owner labels, only when it differs,
// and never over a template another GitOpsCluster owns.
func (w *Writer) writeTemplate(ctx context.Context, goc *v1alpha1.GitOpsCluster, tmpl *addonv1alpha1.AddOnTemplate) error {
	mergeLabels(tmpl, names.OwnerLabels(goc))
	if other, err := w.templateOwner(ctx, tmpl.Name); err != nil {
		return err
	} else if other != "" && other != goc.Namespace+"/"+goc.Name {
		return fmt.Errorf("AddOnTemplate %s belongs to GitOpsCluster %s; it is not overwritten", tmpl.Name, other)
	}
	if err := w.createOrUpdate(ctx, tmpl, func(live client.Object) bool {
		l := live.(*addonv1alpha1.AddOnTemplate)
		userIDs := tmpl.Annotations[v1alpha1.AnnotationUserIDs]
		if templateSpecsEqual(&l.Spec, &tmpl.Spec) && names.HasLabels(l.Labels, tmpl.Labels) && l.Annotations[v1alpha1.AnnotationUserIDs] == userIDs {
			return false
		}
		l.Spec = tmpl.Spec
		mergeLabels(l, tmpl.Labels)
		// The one annotation a template's pods depend on; the others are left as they are.
		if userIDs == "" {
			delete(l.Annotations, v1alpha1.AnnotationUserIDs)
		} else {
			metav1.SetMetaDataAnnotation(&l.ObjectMeta, v1alpha1.AnnotationUserIDs, userIDs)
		}
		return true
	}); err != nil {
		return fmt.Errorf("writing AddOnTemplate %s: %w", tmpl.Name, err)
	}
	return nil
}

// templateSpecsEqual compares two AddOnTemplate specs as equality.Semantic does, but the
// manifests as bytes: the reflective comparison walks a raw manifest byte by byte, which for the
// half-megabyte components template made every reconcile that changed nothing cost milliseconds.
func templateSpecsEqual(a, b *addonv1alpha1.AddOnTemplateSpec) bool {
	am, bm := a.AgentSpec.Workload.Manifests, b.AgentSpec.Workload.Manifests
	if len(am) != len(bm) {
		return false
	}
	for i := range am {
		if !bytes.Equal(am[i].Raw, bm[i].Raw) || am[i].Object != nil || bm[i].Object != nil {
			return false
		}
	}
	ac, bc := *a, *b
	ac.AgentSpec.Workload.Manifests, bc.AgentSpec.Workload.Manifests = nil, nil
	return equality.Semantic.DeepEqual(ac, bc)
}

// deleteOwnedTemplate deletes the AddOnTemplate of that name if this GitOpsCluster owns it.
func (comp Components) deleteOwnedTemplate(ctx context.Context, goc *v1alpha1.GitOpsCluster, name string) error {
	live := &addonv1alpha1.AddOnTemplate{}
	if err := comp.Client.Get(ctx, types.NamespacedName{Name: name}, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !names.HasLabels(live.Labels, names.OwnerLabels(goc)) {
		return nil
	}
	pre := client.Preconditions{UID: &live.UID}
	return client.IgnoreNotFound(comp.Client.Delete(ctx, live, pre))
}

// ReleaseEntries removes this GitOpsCluster's entries from the agent's and the components'
// ClusterManagementAddOns.
func (w *Writer) ReleaseEntries(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	if err := w.applyCMAEntry(ctx, goc, nil); err != nil {
		return err
	}
	return w.applyCMAEntryTo(ctx, goc, w.Components().componentsCMA(), "", nil)
}

// configData is an Argo CD configuration by ConfigMap name.
func configData(c *v1alpha1.ArgoCDConfig) map[string]map[string]string {
	if c == nil {
		return nil
	}
	out := map[string]map[string]string{
		spoke.ArgoCDCM:          c.ArgoCDCM,
		spoke.ArgoCDCmdParamsCM: c.ArgoCDCmdParamsCM,
		spoke.ArgoCDRBACCM:      c.ArgoCDRBACCM,
		spoke.ArgoCDTLSCertsCM:  c.ArgoCDTLSCertsCM,
	}
	if c.SSHKnownHosts != nil {
		out[spoke.ArgoCDSSHKnownHosts] = map[string]string{spoke.SSHKnownHostsKey: *c.SSHKnownHosts}
	}
	return out
}

// ReasonUnsupportedAgentRelease is the Event reason for an agent image whose tag is no supported
// argocd-agent release.
const ReasonUnsupportedAgentRelease = "UnsupportedAgentRelease"

// reportUnpairedAgent says, for the AddOnConfigured condition, that agentImage is no supported
// argocd-agent release and so gets the default pair's components, which may not be the Argo CD
// it was built against; "" for a supported one. The Warning Event goes out when the image has
// just become such, not on every pass.
func (comp Components) reportUnpairedAgent(ctx context.Context, goc *v1alpha1.GitOpsCluster, agentImage string) (string, []config.Event) {
	if agentImage == "" {
		return "", nil
	}
	pair, known := version.ComponentsPair(agentImage)
	if known {
		return "", nil
	}
	var supported []string
	for _, p := range version.Pairs() {
		supported = append(supported, p.Agent)
	}
	msg := fmt.Sprintf("agent image %s: its tag %q is no supported argocd-agent release (supported: %s); the Argo CD components are the default pair's (Argo CD %s)",
		agentImage, version.ImageTag(agentImage), strings.Join(supported, ", "), pair.ArgoCD)
	var events []config.Event
	if comp.agentImageChanged(ctx, goc, agentImage) {
		events = append(events, config.Warning(ReasonUnsupportedAgentRelease, "ApplyAddOn", "%s", msg))
	}
	return "; " + msg, events
}

// agentImageChanged reports whether the config the GitOpsCluster's status last named ran
// another agent image than agentImage (or there is none): configs are named by a hash of their
// spec, so that one still holds the image of the last completed pass.
func (comp Components) agentImageChanged(ctx context.Context, goc *v1alpha1.GitOpsCluster, agentImage string) bool {
	prev := goc.Status.AddOnDeploymentConfig
	if prev == "" {
		return true
	}
	live := &addonv1alpha1.AddOnDeploymentConfig{}
	if err := comp.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: prev}, live); err != nil {
		return apierrors.IsNotFound(err)
	}
	return addon.Variable(live, addon.VarAgentImage) != agentImage
}
