package gitopscluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/addonobjects"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// setProductClaim reports, as OCM's registration agent does from the cluster's ClusterClaim,
// the cluster's product.
func setProductClaim(t *testing.T, cluster, product string) {
	t.Helper()
	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: cluster}, mc); err != nil {
		t.Fatal(err)
	}
	mc.Status.ClusterClaims = []clusterv1.ManagedClusterClaim{{Name: "product.open-cluster-management.io", Value: product}}
	if err := k8s.Status().Update(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
}

// componentsTemplateOf is the AddOnTemplate a cluster's components addon names itself, "" for none.
func componentsTemplateOf(cluster string) (string, error) {
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: cluster, Name: componentsAddon}, mca); err != nil {
		return "", err
	}
	for _, c := range mca.Spec.Configs {
		if c.Resource == "addontemplates" {
			return c.Name, nil
		}
	}
	return "", nil
}

// fixedIDs lists the runAsUser, runAsGroup and fsGroup the pods of objs name.
func fixedIDs(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
			continue
		}
		spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		contexts := map[string]any{"pod": spec["securityContext"]}
		for _, field := range []string{"initContainers", "containers"} {
			list, _ := spec[field].([]any)
			for _, c := range list {
				m := c.(map[string]any)
				contexts[fmt.Sprint(m["name"])] = m["securityContext"]
			}
		}
		for who, sc := range contexts {
			m, _ := sc.(map[string]any)
			for _, k := range []string{"runAsUser", "runAsGroup", "fsGroup"} {
				if v, ok := m[k]; ok {
					out = append(out, fmt.Sprintf("%s %s %s: %s=%v", o.GetKind(), o.GetName(), who, k, v))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestOpenShiftClaimLeavesUIDsToThePlatform: with userIDs left at its default (Auto), the
// Argo CD components of a cluster whose product claim says OpenShift (or a service built on
// it) name no UID, GID or fsGroup, its own Argo CD configuration included; a cluster that
// claims another product keeps redis's fixed UID. OCM's placement controller finds the
// clusters from their claims, OCM's addon-manager renders what each gets. An explicit userIDs:
// Fixed wins over the claim.
func TestOpenShiftClaimLeavesUIDsToThePlatform(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "openshift-claim"
	clusters := []string{"os-config", "os-openshift", "os-plain"}
	createNamespace(t, ns)
	createManagedClusters(t, clusters...)
	setProductClaim(t, "os-plain", "EKS")
	setProductClaim(t, "os-openshift", "OpenShift")
	setProductClaim(t, "os-config", "ROSA")
	createPlacement(t, ns, "pl")
	setDecisions(t, ns, "pl", 1, clusters...)
	createGitOpsCluster(t, ns, "fleet", "pl", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig = []v1alpha1.ClusterArgoCDConfig{
			{ClusterName: "os-config", ArgoCDConfig: v1alpha1.ArgoCDConfig{ArgoCDCM: map[string]string{"a": "b"}}}}
	})
	goc := getGOC(t, ns, "fleet")
	if goc.Spec.ArgoCDAgentAddon.UserIDs != v1alpha1.UserIDsAuto {
		t.Fatalf("userIDs defaults to %q", goc.Spec.ArgoCDAgentAddon.UserIDs)
	}
	for _, c := range clusters {
		reportProbe(t, c, goc)
		createComponentsMCA(t, c)
	}
	placement := addonobjects.OpenShiftPlacementName(goc)
	eventually(t, "the manager's Placement of the clusters that report OpenShift", func() error {
		return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: placement}, &clusterv1beta1.Placement{})
	})
	decided := decideWithOCM(t, ns, placement, clusters...)
	if !slices.Equal(decided, []string{"os-config", "os-openshift"}) {
		t.Fatalf("OCM's placement controller decides %v", decided)
	}
	setDecisions(t, ns, placement, 1, decided...)

	want := map[string]string{"os-plain": "", "os-openshift": addonobjects.AssignedTemplateName(goc), "os-config": names.ComponentsClusterTemplateName(goc, "os-config")}
	eventually(t, "each cluster's components addon names its template", func() error {
		for c, w := range want {
			if got, err := componentsTemplateOf(c); err != nil || got != w {
				return fmt.Errorf("%s names %q, want %q (%v)", c, got, w, err)
			}
		}
		return nil
	})
	rendered := renderComponentsWithOCM(t, getGOC(t, ns, "fleet"), clusters...)
	for _, c := range []string{"os-openshift", "os-config"} {
		if ids := fixedIDs(rendered[c]); len(ids) > 0 {
			t.Errorf("%s reports OpenShift, and its components name IDs: %s", c, strings.Join(ids, "; "))
		}
	}
	if ids := fixedIDs(rendered["os-plain"]); !slices.Contains(ids, "Deployment argocd-redis pod: runAsUser=999") {
		t.Errorf("os-plain's redis does not run as 999: %v", ids)
	}
	for _, o := range rendered["os-config"] {
		if o.GetKind() == "ConfigMap" && o.GetName() == "argocd-cm" {
			if d, _, _ := unstructured.NestedStringMap(o.Object, "data"); d["a"] != "b" {
				t.Errorf("os-config's argocd-cm lost its own configuration: %v", d)
			}
		}
	}

	// An explicit choice wins over the claims.
	g := getGOC(t, ns, "fleet")
	base := g.DeepCopy()
	g.Spec.ArgoCDAgentAddon.UserIDs = v1alpha1.UserIDsFixed
	if err := k8s.Patch(ctx, g, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "userIDs: Fixed: os-openshift takes the GitOpsCluster's template, the template without IDs and the Placement are gone", func() error {
		if got, err := componentsTemplateOf("os-openshift"); err != nil || got != "" {
			return fmt.Errorf("os-openshift names %q (%v)", got, err)
		}
		if err := k8s.Get(ctx, types.NamespacedName{Name: addonobjects.AssignedTemplateName(goc)}, &addonv1alpha1.AddOnTemplate{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the template without IDs is still there (%v)", err)
		}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: placement}, &clusterv1beta1.Placement{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Placement is still there (%v)", err)
		}
		tpl := &addonv1alpha1.AddOnTemplate{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: want["os-config"]}, tpl); err != nil {
			return err
		}
		if tpl.Annotations[v1alpha1.AnnotationUserIDs] != "" {
			return fmt.Errorf("os-config's template still leaves the IDs out: %v", tpl.Annotations)
		}
		return nil
	})
}
