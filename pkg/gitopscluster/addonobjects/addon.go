package addonobjects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/principalpki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/principal"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

// DeploymentConfigPrefix starts the names of a GitOpsCluster's AddOnDeploymentConfigs (same
// namespace). Each name ends in a hash of the config's spec: a change makes a new config, so
// during a progressive rollout the clusters not yet released keep rendering the old one (OCM's
// template addon reads a config by name, not by the spec hash it rolled out).
func DeploymentConfigPrefix(goc *v1alpha1.GitOpsCluster) string { return goc.Name + "-argocd-agent-" }

// deploymentConfigName is the content-addressed name of an AddOnDeploymentConfig spec.
func deploymentConfigName(goc *v1alpha1.GitOpsCluster, spec *addonv1alpha1.AddOnDeploymentConfigSpec) (string, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return DeploymentConfigPrefix(goc) + hex.EncodeToString(sum[:])[:10], nil
}

// FieldManager is the server-side-apply manager of one GitOpsCluster's CMA entry, so that
// each GitOpsCluster owns exactly its own entry of installStrategy.placements.
func FieldManager(goc *v1alpha1.GitOpsCluster) string {
	return "argocd-agent-addon/" + goc.Namespace + "/" + goc.Name
}

// AgentImage picks the spec's image, else the principal's (agents must run its version), else
// the default.
func AgentImage(ctx context.Context, hub config.Hub, goc *v1alpha1.GitOpsCluster, principalNS string) (string, error) {
	if goc.Spec.ArgoCDAgentAddon.Image != "" {
		return goc.Spec.ArgoCDAgentAddon.Image, nil
	}
	if image, found, err := principal.Image(ctx, hub.Client, types.NamespacedName{Namespace: principalNS, Name: hub.Config.PrincipalDeploymentName}); err != nil || found {
		return image, err
	}
	return hub.Config.DefaultAgentImage, nil
}

// Applied are the current AddOnTemplate and AddOnDeploymentConfig of a GitOpsCluster.
type Applied struct {
	Template, Config string
	// ComponentsWaiting: the components' entry still names the user's Placement until the
	// copy has caught up (see applyComponents).
	ComponentsWaiting bool
	// ClusterConfigs: the clusters' own Argo CD configurations (see applyClusterConfigs).
	ClusterConfigs ClusterConfigs
	// Events are for the caller to emit on the GitOpsCluster.
	Events []config.Event
}

// Apply writes the AddOnDeploymentConfig, the AddOnTemplate and this GitOpsCluster's entry
// of the ClusterManagementAddOn, each only when it differs from what is there.
func (w *Writer) Apply(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, ep *v1alpha1.PrincipalEndpoint, hub *principalpki.PKI, owned sets.Set[string]) (Applied, error) {
	mode := string(goc.Spec.ArgoCDAgentAddon.Mode)
	if mode == "" {
		mode = string(v1alpha1.AgentModeManaged)
	}
	adc, err := w.applyDeploymentConfig(ctx, goc, principalNS, ep, mode)
	if err != nil {
		return Applied{}, err
	}
	tmpl, err := w.applyAgentTemplate(ctx, goc, principalNS, hub, mode)
	if err != nil {
		return Applied{}, err
	}
	rollout := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}
	if rs := goc.Spec.ArgoCDAgentAddon.RolloutStrategy; rs != nil {
		rollout = *rs.DeepCopy()
	}
	config := types.NamespacedName{Namespace: adc.Namespace, Name: adc.Name}
	entry := addon.BuildPlacementStrategy(types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, tmpl.Name, config, rollout)
	if err := w.applyCMAEntry(ctx, goc, &entry); err != nil {
		return Applied{}, fmt.Errorf("writing ClusterManagementAddOn %s: %w", w.Config.AddonName, err)
	}
	componentsWaiting, clusterCfg, err := w.Components().applyComponents(ctx, goc, mode, adc, rollout, owned)
	if err != nil {
		return Applied{}, err
	}
	if err := w.deleteUnreferencedTemplates(ctx, goc, tmpl.Name, clusterCfg.templates); err != nil {
		return Applied{}, err
	}
	return Applied{Template: tmpl.Name, Config: adc.Name, ComponentsWaiting: componentsWaiting, ClusterConfigs: clusterCfg, Events: clusterCfg.pairEvents}, nil
}

// applyDeploymentConfig writes the GitOpsCluster's AddOnDeploymentConfig (named by a hash of
// its spec, so a change rolls out under the rollout strategy) when it differs.
func (w *Writer) applyDeploymentConfig(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, ep *v1alpha1.PrincipalEndpoint, mode string) (*addonv1alpha1.AddOnDeploymentConfig, error) {
	image, err := AgentImage(ctx, w.Hub, goc, principalNS)
	if err != nil {
		return nil, err
	}
	var argoCDImages spoke.Images
	if componentsWanted(goc) {
		// The pair is the agent release's, read from the tag, which the registry setting and
		// a cluster's mirrors leave as it is.
		if argoCDImages, err = w.spokeImages(image); err != nil {
			return nil, err
		}
	}
	image = spoke.RewriteRegistry(image, w.Config.SpokeImageRegistry)
	adc, err := addon.BuildDeploymentConfig(addon.DeploymentConfigInput{
		Name: DeploymentConfigPrefix(goc) + "pending", Namespace: goc.Namespace, AgentInstallNamespace: installNamespace(w.Config, goc),
		ServerAddress: ep.Address, ServerPort: ep.Port, Mode: mode, AgentImage: image,
		ReloaderImage: spoke.RewriteRegistry(w.Config.ReloaderImage, w.Config.SpokeImageRegistry),
		ArgoCDImage:   argoCDImages.ArgoCD, RedisImage: argoCDImages.Redis,
	})
	if err != nil {
		return nil, fmt.Errorf("building AddOnDeploymentConfig: %w", err)
	}
	if adc.Name, err = deploymentConfigName(goc, &adc.Spec); err != nil {
		return nil, err
	}
	adc.Labels = names.OwnerLabels(goc)
	if err := controllerutil.SetControllerReference(goc, adc, w.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := w.createOrUpdate(ctx, adc, func(live client.Object) bool {
		l := live.(*addonv1alpha1.AddOnDeploymentConfig)
		if equality.Semantic.DeepEqual(l.Spec, adc.Spec) && names.HasLabels(l.Labels, adc.Labels) {
			return false
		}
		l.Spec = adc.Spec
		mergeLabels(l, adc.Labels)
		return true
	}); err != nil {
		return nil, fmt.Errorf("writing AddOnDeploymentConfig %s/%s: %w", adc.Namespace, adc.Name, err)
	}
	return adc, nil
}

// applyAgentTemplate writes the agent's AddOnTemplate: the agent with the hub's trust bundle,
// mode and options, and the GitOpsCluster's pod settings.
func (w *Writer) applyAgentTemplate(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, hub *principalpki.PKI, mode string) (*addonv1alpha1.AddOnTemplate, error) {
	tmpl, err := addon.BuildAddOnTemplate(addon.TemplateInput{
		AddonName: w.Config.AddonName, TemplateName: names.TemplateName(goc), SignerName: w.Config.SignerName,
		SigningCANamespace: principalNS,
		CABundlePEM:        hub.Bundle, Mode: mode, ImagePullSecrets: w.Config.SpokeImagePullSecrets,
		DestinationBasedMapping: goc.Spec.ArgoCDAgentAddon.ApplicationMapping == v1alpha1.ApplicationMappingDestination,
		AssignedUserIDs:         goc.Spec.ArgoCDAgentAddon.UserIDs == v1alpha1.UserIDsAssigned,
		Redis:                   existingRedis(goc),
	})
	if err != nil {
		return nil, fmt.Errorf("building AddOnTemplate: %w", err)
	}
	if err := addon.ApplyPodSettings(tmpl.Spec.AgentSpec.Workload.Manifests, podSettings(goc)); err != nil {
		return nil, fmt.Errorf("placing the agent's pods: %w", err)
	}
	tmpl.Labels = names.OwnerLabels(goc)
	if err := w.writeTemplate(ctx, goc, tmpl); err != nil {
		return nil, err
	}
	return tmpl, nil
}

// deleteUnreferencedTemplates deletes the GitOpsCluster's other templates (an earlier naming
// scheme, a cluster's configuration that was removed): nothing references them any more.
func (w *Writer) deleteUnreferencedTemplates(ctx context.Context, goc *v1alpha1.GitOpsCluster, agentTemplate string, clusterTemplates sets.Set[string]) error {
	var templates addonv1alpha1.AddOnTemplateList
	if err := w.Client.List(ctx, &templates, client.MatchingLabels{v1alpha1.LabelOwnerNamespace: goc.Namespace, v1alpha1.LabelOwnerName: goc.Name}); err != nil {
		return err
	}
	for i := range templates.Items {
		if old := &templates.Items[i]; old.Name != agentTemplate && old.Name != names.ComponentsTemplateName(goc) && !clusterTemplates.Has(old.Name) {
			if err := w.Client.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting the replaced AddOnTemplate %s: %w", old.Name, err)
			}
		}
	}
	return nil
}

// templateOwner returns "<namespace>/<name>" of the GitOpsCluster that owns the AddOnTemplate
// of that name, "" when it does not exist or carries no owner.
func (w *Writer) templateOwner(ctx context.Context, name string) (string, error) {
	live := &addonv1alpha1.AddOnTemplate{}
	if err := w.Client.Get(ctx, types.NamespacedName{Name: name}, live); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	ns, n := live.Labels[v1alpha1.LabelOwnerNamespace], live.Labels[v1alpha1.LabelOwnerName]
	if n == "" {
		return "", nil
	}
	return ns + "/" + n, nil
}

// applyCMAEntry server-side-applies the CMA with only this GitOpsCluster's placement entry
// (or none, to remove it). Entries of other GitOpsClusters belong to their own field managers
// and are left untouched. Nothing is sent when the live object already matches.
func (w *Writer) applyCMAEntry(ctx context.Context, goc *v1alpha1.GitOpsCluster, entry *addonv1alpha1.PlacementStrategy) error {
	return w.applyCMAEntryTo(ctx, goc, addon.BuildClusterManagementAddOn(w.Config.AddonName, "argocd-agent"), goc.Spec.PlacementRef.Name, entry)
}

// applyCMAEntryTo is applyCMAEntry for any of the addons a GitOpsCluster configures, whose entry
// is keyed by the Placement named placement ("" when removing: whichever entry is this
// GitOpsCluster's).
func (w *Writer) applyCMAEntryTo(ctx context.Context, goc *v1alpha1.GitOpsCluster, desired *addonv1alpha1.ClusterManagementAddOn, placement string, entry *addonv1alpha1.PlacementStrategy) error {
	live := &addonv1alpha1.ClusterManagementAddOn{}
	reader := client.Reader(w.Client)
	if entry == nil {
		// Removing reads the live object: a stale cache must not make us re-create a CMA
		// another GitOpsCluster's cleanup has just deleted.
		reader = w.Reader
	}
	err := reader.Get(ctx, types.NamespacedName{Name: desired.Name}, live)
	switch {
	case apierrors.IsNotFound(err):
		if entry == nil {
			return nil
		}
		live = nil
	case err != nil:
		return err
	}
	if live != nil && cmaMatches(live, desired, goc, placement, entry) {
		return nil
	}
	if entry == nil && live != nil && names.ManagedByUs(live) && onlyEntryIs(live, goc, placement) {
		// The entry is keyed by Placement: while another GitOpsCluster names the same
		// Placement, the entry is its too, and only this one's fields are released below.
		shared, err := w.placementShared(ctx, goc)
		if err != nil {
			return err
		}
		if !shared {
			// Releasing the last entry would leave a CMA without a spec, which the API refuses:
			// the last GitOpsCluster deletes the CMA instead, if nobody changed it since we read it.
			pre := client.Preconditions{ResourceVersion: &live.ResourceVersion}
			return client.IgnoreNotFound(w.Client.Delete(ctx, live, pre))
		}
	}
	desired.Spec.InstallStrategy.Placements = nil
	if entry != nil {
		desired.Spec.InstallStrategy.Placements = []addonv1alpha1.PlacementStrategy{*entry}
	}
	u, err := toApplyObject(desired, w.Client.Scheme())
	if err != nil {
		return err
	}
	if entry == nil {
		// Keep only what identifies the object, so applying releases every field we owned.
		// The resourceVersion makes the apply a precondition on the object we read: if it was
		// deleted meanwhile the apply fails instead of creating an empty CMA.
		u = &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
			"metadata": map[string]any{"name": u.GetName(), "resourceVersion": live.ResourceVersion}}}
	}
	return w.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager(goc)), client.ForceOwnership)
}

// placementShared reports whether another live GitOpsCluster names goc's Placement.
func (w *Writer) placementShared(ctx context.Context, goc *v1alpha1.GitOpsCluster) (bool, error) {
	owner, err := ownership.PlacementOwner(ctx, w.Client, goc.Namespace, goc.Spec.PlacementRef.Name)
	if err != nil {
		return false, err
	}
	if owner != nil && (owner.Namespace != goc.Namespace || owner.Name != goc.Name) {
		return true, nil
	}
	// goc may be the owner; any younger live one shares it too.
	keys, err := ownership.GitOpsClustersForPlacement(ctx, w.Client, goc.Namespace, goc.Spec.PlacementRef.Name)
	if err != nil {
		return false, err
	}
	for _, k := range keys {
		if k.Namespace == goc.Namespace && k.Name == goc.Name {
			continue
		}
		if live, err := ownership.Live(ctx, w.Client, k); err != nil || live {
			return live, err
		}
	}
	return false, nil
}

func cmaMatches(live, desired *addonv1alpha1.ClusterManagementAddOn, goc *v1alpha1.GitOpsCluster, placement string, entry *addonv1alpha1.PlacementStrategy) bool {
	var found *addonv1alpha1.PlacementStrategy
	for i := range live.Spec.InstallStrategy.Placements {
		p := &live.Spec.InstallStrategy.Placements[i]
		if p.Namespace == goc.Namespace && p.Name == placement {
			found = p
		}
	}
	if entry == nil {
		if placement == "" {
			return !managesFields(live, FieldManager(goc))
		}
		return found == nil || !managesFields(live, FieldManager(goc))
	}
	if found == nil || !equality.Semantic.DeepEqual(found.Configs, entry.Configs) || !rolloutEqual(found.RolloutStrategy, entry.RolloutStrategy) {
		return false
	}
	if live.Spec.InstallStrategy.Type != desired.Spec.InstallStrategy.Type {
		return false
	}
	//lint:ignore SA1019 supportedConfigs is how OCM v1alpha1 marks a template-based addon.
	if !equality.Semantic.DeepEqual(live.Spec.SupportedConfigs, desired.Spec.SupportedConfigs) {
		return false
	}
	for k, v := range desired.Annotations {
		if live.Annotations[k] != v {
			return false
		}
	}
	return managesFields(live, FieldManager(goc))
}

// rolloutEqual compares after the API server's defaulting of an empty type to All.
func rolloutEqual(a, b clusterv1alpha1.RolloutStrategy) bool {
	if a.Type == "" {
		a.Type = clusterv1alpha1.All
	}
	if b.Type == "" {
		b.Type = clusterv1alpha1.All
	}
	return equality.Semantic.DeepEqual(a, b)
}

func managesFields(o metav1.Object, manager string) bool {
	for _, mf := range o.GetManagedFields() {
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// toApplyObject converts a typed object into the unstructured form sent with server-side
// apply, without status and zero-valued metadata that would claim fields we do not manage.
func toApplyObject(obj client.Object, scheme *runtime.Scheme) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// createOrUpdate creates desired, or lets mutate bring the live object in line; mutate returns
// false when nothing differs, and then nothing is written.
func (w *Writer) createOrUpdate(ctx context.Context, desired client.Object, mutate func(live client.Object) bool) error {
	live := desired.DeepCopyObject().(client.Object)
	err := w.Client.Get(ctx, client.ObjectKeyFromObject(desired), live)
	if apierrors.IsNotFound(err) {
		return w.Client.Create(ctx, desired)
	}
	if err != nil {
		return err
	}
	if !mutate(live) {
		return nil
	}
	return w.Client.Update(ctx, live)
}

func mergeLabels(o metav1.Object, want map[string]string) {
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range want {
		l[k] = v
	}
	o.SetLabels(l)
}

// onlyEntryIs reports whether the CMA's placements are at most this GitOpsCluster's entry, keyed
// by placement; with placement "", whether the one entry left is the one this GitOpsCluster
// applied (it applies one entry at most, and manages fields of it).
func onlyEntryIs(cma *addonv1alpha1.ClusterManagementAddOn, goc *v1alpha1.GitOpsCluster, placement string) bool {
	if placement == "" {
		return len(cma.Spec.InstallStrategy.Placements) <= 1 && managesFields(cma, FieldManager(goc))
	}
	for _, p := range cma.Spec.InstallStrategy.Placements {
		if p.Namespace != goc.Namespace || p.Name != placement {
			return false
		}
	}
	return true
}

// PruneDeploymentConfigs deletes this GitOpsCluster's AddOnDeploymentConfigs other than the
// current one once no ManagedClusterAddOn of a selected cluster still wants or last applied
// them. It reports whether old ones must wait for a rollout to finish.
func (w *Writer) PruneDeploymentConfigs(ctx context.Context, goc *v1alpha1.GitOpsCluster, current string, clusters []string) (bool, error) {
	var adcs addonv1alpha1.AddOnDeploymentConfigList
	if err := w.Client.List(ctx, &adcs, client.InNamespace(goc.Namespace), client.MatchingLabels{
		v1alpha1.LabelOwnerNamespace: goc.Namespace, v1alpha1.LabelOwnerName: goc.Name}); err != nil {
		return false, err
	}
	var stale []*addonv1alpha1.AddOnDeploymentConfig
	for i := range adcs.Items {
		// The clusters' mirrored copies of the current config are Apply's to delete (mirrors.go).
		if a := &adcs.Items[i]; a.Name != current && a.Labels[v1alpha1.LabelMirrorsOf] != configHash(goc, current) {
			stale = append(stale, a)
		}
	}
	if len(stale) == 0 {
		return false, nil
	}
	inUse := map[string]bool{}
	// The components addon shares the config and rolls out on its own, so its clusters count too.
	readers := map[string]client.Reader{w.Config.AddonName: w.Client}
	if w.ComponentsAddOns != nil {
		readers[config.ComponentsAddonName(w.Config.AddonName)] = w.ComponentsAddOns
	}
	for _, c := range clusters {
		for addonName, reader := range readers {
			if err := addConfigsInUse(ctx, reader, goc, c, addonName, inUse); err != nil {
				return false, err
			}
		}
	}
	waiting := false
	for _, adc := range stale {
		if inUse[adc.Name] {
			waiting = true
			continue
		}
		if err := w.Client.Delete(ctx, adc); client.IgnoreNotFound(err) != nil {
			return false, err
		}
	}
	return waiting, nil
}

// addConfigsInUse marks the AddOnDeploymentConfigs of goc that the ManagedClusterAddOn addonName
// of cluster wants or last applied.
func addConfigsInUse(ctx context.Context, reader client.Reader, goc *v1alpha1.GitOpsCluster, cluster, addonName string, inUse map[string]bool) error {
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: cluster, Name: addonName}, mca); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, ref := range mca.Status.ConfigReferences {
		if ref.Resource != addon.ResourceAddOnDeploymentConfigs {
			continue
		}
		for _, spec := range []*addonv1alpha1.ConfigSpecHash{ref.DesiredConfig, ref.LastAppliedConfig} {
			if spec != nil && spec.Namespace == goc.Namespace {
				inUse[spec.Name] = true
			}
		}
		// Older hubs name the config only in the (deprecated) referent.
		if referent := ref.ConfigReferent; referent.Namespace == goc.Namespace {
			inUse[referent.Name] = true
		}
	}
	return nil
}

// ApplicationMappingConflict says why goc's applicationMapping cannot hold, or "". A
// principal routes every managed-mode Application one way (its --destination-based-mapping),
// so all managed GitOpsClusters of one principal namespace must ask for the same mapping; the
// oldest decides, as for the PKI. The agents are configured all the same (a CA rotation must
// still reach them); the condition says that the principal routes one of the two wrongly.
func ApplicationMappingConflict(goc *v1alpha1.GitOpsCluster, principalNS string, members ownership.Members) string {
	if !managedMode(goc) {
		return ""
	}
	decider := members.Elder(goc, managedMode)
	if mine, theirs := applicationMapping(goc), applicationMapping(decider); mine != theirs {
		return fmt.Sprintf("applicationMapping is %s, but the older managed GitOpsCluster %s/%s of the principal in namespace %s asks for %s, and the principal routes all its Applications one way: give every managed GitOpsCluster of that principal the same applicationMapping (and the principal the matching --destination-based-mapping)",
			mine, decider.Namespace, decider.Name, principalNS, theirs)
	}
	return ""
}

func managedMode(goc *v1alpha1.GitOpsCluster) bool {
	m := goc.Spec.ArgoCDAgentAddon.Mode
	return m == "" || m == v1alpha1.AgentModeManaged
}

func applicationMapping(goc *v1alpha1.GitOpsCluster) v1alpha1.ApplicationMapping {
	if m := goc.Spec.ArgoCDAgentAddon.ApplicationMapping; m != "" {
		return m
	}
	return v1alpha1.ApplicationMappingNamespace
}

// existingRedis is the redis of the clusters' own Argo CD the GitOpsCluster names (defaults
// where it names none).
func existingRedis(goc *v1alpha1.GitOpsCluster) addon.Redis {
	r := goc.Spec.ArgoCDAgentAddon.Redis
	if r == nil || goc.Spec.ArgoCDAgentAddon.ArgoCDComponents != v1alpha1.ArgoCDComponentsExisting {
		return addon.Redis{}
	}
	return addon.Redis{Address: r.Address, SecretName: r.PasswordSecretName, SecretKey: r.PasswordSecretKey}
}

// podSettings are the GitOpsCluster's node placement and container resources for every pod
// the addon runs on its clusters.
func podSettings(goc *v1alpha1.GitOpsCluster) addon.PodSettings {
	var p addon.PodSettings
	if np := goc.Spec.ArgoCDAgentAddon.NodePlacement; np != nil {
		p.NodeSelector, p.Tolerations = np.NodeSelector, np.Tolerations
	}
	for _, r := range goc.Spec.ArgoCDAgentAddon.ContainerResources {
		p.Resources = append(p.Resources, addon.ContainerResources{Workload: r.Workload, Container: r.Container, Resources: r.Resources})
	}
	return p
}
