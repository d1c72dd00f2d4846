package gitopscluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// setImageRegistries gives a ManagedCluster OCM's image-registries annotation, as a
// ManagedClusterImageRegistry does.
func setImageRegistries(t *testing.T, cluster, registries string) {
	t.Helper()
	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: cluster}, mc); err != nil {
		t.Fatal(err)
	}
	base := mc.DeepCopy()
	metav1.SetMetaDataAnnotation(&mc.ObjectMeta, clusterv1.ClusterImageRegistriesAnnotationKey, registries)
	if err := k8s.Patch(context.Background(), mc, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// componentsDeploymentConfig is the AddOnDeploymentConfig a cluster's components addon names
// itself, "" for none.
func componentsDeploymentConfig(cluster string) (string, error) {
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: cluster, Name: componentsAddon}, mca); err != nil {
		return "", err
	}
	for _, c := range mca.Spec.Configs {
		if c.Resource == addon.ResourceAddOnDeploymentConfigs {
			return c.Namespace + "/" + c.Name, nil
		}
	}
	return "", nil
}

// TestImageMirrorsReachTheStatefulSetAndInitContainers: OCM moves only the containers of
// Deployments to a cluster's image mirrors. Rendered by OCM's own addon-manager, a cluster with
// mirrors runs the application-controller's StatefulSet, every init container and every
// Deployment's containers from its mirrors, each image moved once, also where a mirror lies
// under its source's own path (moved twice, it would go to argoproj-mirror-mirror); a cluster
// without mirrors keeps the GitOpsCluster's config and the images as they are.
func TestImageMirrorsReachTheStatefulSetAndInitContainers(t *testing.T) {
	t.Parallel()
	const ns = "image-mirrors"
	clusters := []string{"im-plain", "im-mirror", "im-nested"}
	createNamespace(t, ns)
	createManagedClusters(t, clusters...)
	setImageRegistries(t, "im-mirror", `{"registries":[{"source":"quay.io/argoproj","mirror":"mirror.example.com/argoproj"},`+
		`{"source":"public.ecr.aws/docker/library","mirror":"mirror.example.com/library/"}]}`)
	setImageRegistries(t, "im-nested", `{"registries":[{"source":"quay.io/argoproj","mirror":"quay.io/argoproj-mirror"}]}`)
	createPlacement(t, ns, "pl")
	setDecisions(t, ns, "pl", 1, clusters...)
	createGitOpsCluster(t, ns, "fleet", "pl", withAddress("principal.example.com"))
	goc := getGOC(t, ns, "fleet")
	for _, c := range clusters {
		reportProbe(t, c, goc)
		createComponentsMCA(t, c)
	}
	eventually(t, "the clusters with mirrors name a config of their own, the other none", func() error {
		for _, c := range clusters {
			cfg, err := componentsDeploymentConfig(c)
			if err != nil {
				return err
			}
			if (cfg != "") != (c != "im-plain") {
				return fmt.Errorf("%s's components addon names config %q", c, cfg)
			}
		}
		return nil
	})
	conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)

	goc = getGOC(t, ns, "fleet")
	vars := adcVariables(t, ns, goc.Status.AddOnDeploymentConfig)
	argocd, redis := vars[addon.VarArgoCDImage], vars[addon.VarRedisImage]
	if !strings.HasPrefix(argocd, "quay.io/argoproj/") || !strings.HasPrefix(redis, "public.ecr.aws/docker/library/") {
		t.Fatalf("the images are %s and %s: the mirrors below no longer match them", argocd, redis)
	}
	moved := func(image, source, mirror string) string { return mirror + strings.TrimPrefix(image, source) }
	want := map[string]struct{ argocd, redis string }{
		"im-plain":  {argocd, redis},
		"im-mirror": {moved(argocd, "quay.io", "mirror.example.com"), moved(redis, "public.ecr.aws/docker", "mirror.example.com")},
		"im-nested": {moved(argocd, "quay.io/argoproj", "quay.io/argoproj-mirror"), redis},
	}
	rendered := renderComponentsWithOCM(t, goc, clusters...)
	for _, c := range clusters {
		w := want[c]
		for _, wl := range []struct {
			kind, name string
			images     map[string]string
		}{
			{"StatefulSet", "argocd-application-controller", map[string]string{"argocd-application-controller": w.argocd}},
			{"Deployment", "argocd-redis", map[string]string{"secret-init": w.argocd, "redis": w.redis}},
			{"Deployment", "argocd-repo-server", map[string]string{"copyutil": w.argocd, "argocd-repo-server": w.argocd}},
		} {
			got := podImages(t, rendered[c], wl.kind, wl.name)
			for container, image := range wl.images {
				if got[container] != image {
					t.Errorf("%s: %s %s container %s runs %q, want %q", c, wl.kind, wl.name, container, got[container], image)
				}
			}
		}
	}

	// The mirrors gone, the cluster's addon takes the GitOpsCluster's config again and the
	// cluster's own is deleted once nothing names it.
	setImageRegistries(t, "im-nested", `{"registries":[]}`)
	cfg, err := componentsDeploymentConfig("im-mirror")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "im-nested's addon names no config of its own", func() error {
		if c, err := componentsDeploymentConfig("im-nested"); err != nil || c != "" {
			return fmt.Errorf("names %q (%v)", c, err)
		}
		return nil
	})
	eventually(t, "only the config im-mirror uses is left beside the GitOpsCluster's", func() error {
		var adcs addonv1alpha1.AddOnDeploymentConfigList
		if err := k8s.List(context.Background(), &adcs, client.InNamespace(ns), client.MatchingLabels(names.OwnerLabels(goc))); err != nil {
			return err
		}
		var left []string
		for _, a := range adcs.Items {
			left = append(left, ns+"/"+a.Name)
		}
		if len(left) != 2 || (left[0] != cfg && left[1] != cfg) {
			return fmt.Errorf("configs %v; im-mirror's is %s", left, cfg)
		}
		return nil
	})
}

// wake annotates the GitOpsCluster, which runs a pass.
func wake(t *testing.T, ns, name string) {
	t.Helper()
	g := getGOC(t, ns, name)
	base := g.DeepCopy()
	metav1.SetMetaDataAnnotation(&g.ObjectMeta, "test.argocd-agent-addon.io/wake", g.ResourceVersion)
	if err := k8s.Patch(context.Background(), g, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// TestAComponentsAddOnCreatedLaterGetsItsClusterConfig: OCM creates a cluster's components
// ManagedClusterAddOn when it pleases, possibly after the GitOpsCluster's last pass; its creation
// alone must wake the GitOpsClusters of that cluster, or a cluster with image mirrors keeps the
// shared config until something else happens to run a pass.
func TestAComponentsAddOnCreatedLaterGetsItsClusterConfig(t *testing.T) {
	const ns, cluster = "image-mirrors-late", "im-late"
	goc := fleetOfOne(t, ns, cluster)
	setImageRegistries(t, cluster, `{"registries":[{"source":"quay.io/argoproj","mirror":"mirror.example.com/argoproj"}]}`)
	reportProbe(t, cluster, goc)
	conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
	// The passes the probe and the status write wake are over (the probe's after
	// OCMStatusSettle), so that only the addon's creation can wake the next.
	waitSettled(t, func() int { return reconciles.get("gitopscluster", ns, "fleet") }, 2*gitopscluster.OCMStatusSettle)

	createComponentsMCA(t, cluster)
	eventually(t, cluster+"'s new components addon names a config of its own", func() error {
		if cfg, err := componentsDeploymentConfig(cluster); err != nil || cfg == "" {
			return fmt.Errorf("names %q (%v)", cfg, err)
		}
		return nil
	})
}
