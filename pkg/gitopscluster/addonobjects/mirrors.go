package addonobjects

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// A cluster's image mirrors (OCM's image-registries annotation on its ManagedCluster, which a
// ManagedClusterImageRegistry sets) are applied by OCM's template addon to the containers of
// Deployments and DaemonSets only: Argo CD's application-controller is a StatefulSet, and
// redis has an init container, and both would pull from the original registry. The images are
// template variables, so a cluster whose mirrors move any of them gets, for its components
// addon, an AddOnDeploymentConfig of its own: the GitOpsCluster's, every image variable
// already moved to the mirror, and registries that map each of those images onto itself. OCM
// takes a config's registries over the annotation's, so it leaves the images as they are
// instead of moving a Deployment's a second time (a mirror under its own source's path, or
// one mirror's source naming another, would move it again). Clusters whose images move alike
// share one such config, named, as the GitOpsCluster's, by a hash of its spec. The agent's
// addon needs none: its pods are a Deployment's containers.

// imageVariables are the ADC variables that hold an image.
var imageVariables = []string{addon.VarAgentImage, addon.VarReloaderImage, addon.VarArgoCDImage, addon.VarRedisImage}

// clusterMirrors reads the image mirrors OCM's image-registries annotation gives the cluster;
// nil when it has none or the annotation cannot be read (OCM then renders nothing there).
func clusterMirrors(mc *clusterv1.ManagedCluster) []addonv1alpha1.ImageMirror {
	raw := mc.Annotations[clusterv1.ClusterImageRegistriesAnnotationKey]
	if raw == "" {
		return nil
	}
	var v struct {
		Registries []addonv1alpha1.ImageMirror `json:"registries"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return nil
	}
	return v.Registries
}

// mirrorImage is image as OCM's addon-framework (v1.2) rewrites it for registries, so that
// the StatefulSet and init containers end up where OCM puts the Deployments' containers: each
// entry is tried on the original image, and the last one that changes it wins. An entry
// without source replaces everything before the image's last path segment; one with a source
// replaces that prefix (a plain string prefix, as OCM compares it).
func mirrorImage(registries []addonv1alpha1.ImageMirror, image string) string {
	out := image
	for _, r := range registries {
		source, mirror := strings.TrimSuffix(r.Source, "/"), strings.TrimSuffix(r.Mirror, "/")
		moved := image
		switch {
		case source == "":
			last := image[strings.LastIndex(image, "/")+1:]
			moved = last
			if mirror != "" {
				moved = mirror + "/" + last
			}
		case strings.HasPrefix(image, source):
			moved = mirror + strings.TrimPrefix(image, source)
		}
		if moved != image {
			out = moved
		}
	}
	return out
}

// mirroredConfig is the components' AddOnDeploymentConfig for a cluster with these mirrors,
// or nil when they move none of shared's images.
func mirroredConfig(goc *v1alpha1.GitOpsCluster, shared *addonv1alpha1.AddOnDeploymentConfig, registries []addonv1alpha1.ImageMirror) (*addonv1alpha1.AddOnDeploymentConfig, error) {
	if len(registries) == 0 {
		return nil, nil
	}
	spec := shared.Spec.DeepCopy()
	var keep []addonv1alpha1.ImageMirror
	moved := false
	for i := range spec.CustomizedVariables {
		v := &spec.CustomizedVariables[i]
		if !slices.Contains(imageVariables, v.Name) {
			continue
		}
		m := mirrorImage(registries, v.Value)
		if m != v.Value {
			moved = true
			// The value lands in the manifests unescaped, like every variable.
			if err := addon.ValidateVariable(v.Name, m); err != nil {
				return nil, fmt.Errorf("the image mirrors move %s to an unusable value: %w", v.Value, err)
			}
		}
		v.Value = m
		if m != "" && !slices.ContainsFunc(keep, func(k addonv1alpha1.ImageMirror) bool { return k.Source == m }) {
			keep = append(keep, addonv1alpha1.ImageMirror{Source: m, Mirror: m})
		}
	}
	if !moved {
		return nil, nil
	}
	spec.Registries = keep
	adc := &addonv1alpha1.AddOnDeploymentConfig{Spec: *spec}
	adc.Namespace = shared.Namespace
	name, err := deploymentConfigName(goc, spec)
	if err != nil {
		return nil, err
	}
	adc.Name = name
	adc.Labels = names.OwnerLabels(goc)
	adc.Labels[v1alpha1.LabelMirrorsOf] = configHash(goc, shared.Name)
	return adc, nil
}

// configHash is the hash part of the name of one of goc's AddOnDeploymentConfigs: a label
// value, which the name itself may be too long to be.
func configHash(goc *v1alpha1.GitOpsCluster, name string) string {
	return strings.TrimPrefix(name, DeploymentConfigPrefix(goc))
}

// mirroredConfigs writes the components' AddOnDeploymentConfigs of the clusters in owned whose
// mirrors move an image, each only when it differs, and returns their names by cluster.
func (comp Components) mirroredConfigs(ctx context.Context, goc *v1alpha1.GitOpsCluster, shared *addonv1alpha1.AddOnDeploymentConfig, owned sets.Set[string]) (map[string]string, error) {
	out := map[string]string{}
	written := sets.New[string]()
	// One cache read per owned cluster, not a walk over the fleet: a hub of thousands of
	// clusters and several GitOpsClusters would otherwise visit every cluster on every pass.
	for _, name := range sets.List(owned) {
		var mc clusterv1.ManagedCluster
		// Read-only: only the annotation is read, so the cache's own object serves.
		if err := comp.Client.Get(ctx, client.ObjectKey{Name: name}, &mc, client.UnsafeDisableDeepCopy); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		adc, err := mirroredConfig(goc, shared, clusterMirrors(&mc))
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		if adc == nil {
			continue
		}
		if !written.Has(adc.Name) {
			if err := comp.writeConfig(ctx, goc, adc); err != nil {
				return nil, err
			}
			written.Insert(adc.Name)
		}
		out[name] = adc.Name
	}
	return out, nil
}

// writeConfig writes one of goc's AddOnDeploymentConfigs, owned by it, when it differs.
func (comp Components) writeConfig(ctx context.Context, goc *v1alpha1.GitOpsCluster, adc *addonv1alpha1.AddOnDeploymentConfig) error {
	if err := controllerutil.SetControllerReference(goc, adc, comp.Client.Scheme()); err != nil {
		return err
	}
	if err := comp.createOrUpdate(ctx, adc, func(live client.Object) bool {
		l := live.(*addonv1alpha1.AddOnDeploymentConfig)
		if equality.Semantic.DeepEqual(l.Spec, adc.Spec) && names.HasLabels(l.Labels, adc.Labels) {
			return false
		}
		l.Spec = adc.Spec
		mergeLabels(l, adc.Labels)
		return true
	}); err != nil {
		return fmt.Errorf("writing AddOnDeploymentConfig %s/%s: %w", adc.Namespace, adc.Name, err)
	}
	return nil
}

// deleteUnusedMirroredConfigs deletes goc's mirrored configs of the current shared config that
// are not in keep (those a cluster is given, and those a ManagedClusterAddOn names or OCM still
// renders). Those of earlier shared configs are PruneDeploymentConfigs'.
func (comp Components) deleteUnusedMirroredConfigs(ctx context.Context, goc *v1alpha1.GitOpsCluster, shared string, keep sets.Set[string]) error {
	var adcs addonv1alpha1.AddOnDeploymentConfigList
	if err := comp.Client.List(ctx, &adcs, client.InNamespace(goc.Namespace), client.MatchingLabels{
		v1alpha1.LabelOwnerNamespace: goc.Namespace, v1alpha1.LabelOwnerName: goc.Name, v1alpha1.LabelMirrorsOf: configHash(goc, shared)}); err != nil {
		return err
	}
	for i := range adcs.Items {
		adc := &adcs.Items[i]
		if keep.Has(adc.Name) {
			continue
		}
		if err := comp.Client.Delete(ctx, adc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the unused AddOnDeploymentConfig %s/%s: %w", adc.Namespace, adc.Name, err)
		}
	}
	return nil
}

// configsInStatus are the AddOnDeploymentConfigs in namespace ns that OCM wants or last applied
// for a ManagedClusterAddOn.
func configsInStatus(mca *addonv1alpha1.ManagedClusterAddOn, ns string) []string {
	var out []string
	for _, ref := range mca.Status.ConfigReferences {
		if ref.Resource != addon.ResourceAddOnDeploymentConfigs {
			continue
		}
		for _, spec := range []*addonv1alpha1.ConfigSpecHash{ref.DesiredConfig, ref.LastAppliedConfig} {
			if spec != nil && spec.Namespace == ns {
				out = append(out, spec.Name)
			}
		}
	}
	return out
}
