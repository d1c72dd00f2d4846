package status

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
)

func TestTroubled(t *testing.T) {
	for _, tc := range []struct {
		typ    string
		status metav1.ConditionStatus
		want   bool
	}{
		{v1alpha1.ConditionReady, metav1.ConditionTrue, false},
		{v1alpha1.ConditionReady, metav1.ConditionFalse, true},
		{v1alpha1.ConditionCertificatesReady, metav1.ConditionUnknown, true},
		{v1alpha1.ConditionRevocationPaused, metav1.ConditionFalse, false},
		{v1alpha1.ConditionRevocationPaused, metav1.ConditionTrue, true},
		{v1alpha1.ConditionForeignArgoCD, metav1.ConditionFalse, false},
		{v1alpha1.ConditionForeignArgoCD, metav1.ConditionTrue, true},
	} {
		if got := troubled(metav1.Condition{Type: tc.typ, Status: tc.status}); got != tc.want {
			t.Errorf("%s=%s: troubled %v, want %v", tc.typ, tc.status, got, tc.want)
		}
	}
}

// TestAgentImageComesOnlyFromTheGitOpsClustersOwnConfig: a ManagedClusterAddOn's status, which
// the managed cluster's own identity may write, naming another namespace's config or one this
// GitOpsCluster does not control shows no image; the GitOpsCluster's own config shows its image.
func TestAgentImageComesOnlyFromTheGitOpsClustersOwnConfig(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := addonv1alpha1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gitops", UID: "goc-uid"}}
	goc.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("GitOpsCluster"))
	adc := func(ns, name, image string, owned bool) *addonv1alpha1.AddOnDeploymentConfig {
		a := &addonv1alpha1.AddOnDeploymentConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: addonv1alpha1.AddOnDeploymentConfigSpec{CustomizedVariables: []addonv1alpha1.CustomizedVariable{{Name: addon.VarAgentImage, Value: image}}}}
		if owned {
			a.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "GitOpsCluster", Name: goc.Name, UID: goc.UID, Controller: ptr.To(true)}}
		}
		return a
	}
	mca := func(cluster, ns, name string) *addonv1alpha1.ManagedClusterAddOn {
		return &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: "argocd-agent"},
			Status: addonv1alpha1.ManagedClusterAddOnStatus{ConfigReferences: []addonv1alpha1.ConfigReference{{
				ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: "addondeploymentconfigs"},
				LastAppliedConfig:   &addonv1alpha1.ConfigSpecHash{ConfigReferent: addonv1alpha1.ConfigReferent{Namespace: ns, Name: name}},
			}}}}
	}
	r := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		adc("team-a", "own", "agent:own", true),
		adc("team-b", "other-tenant", "agent:team-b", true),
		adc("team-a", "not-controlled", "agent:stray", false),
		mca("c-own", "team-a", "own"),
		mca("c-other", "team-b", "other-tenant"),
		mca("c-stray", "team-a", "not-controlled"),
	).Build()
	for cluster, want := range map[string]string{"c-own": "agent:own", "c-other": "-", "c-stray": "-"} {
		_, image, err := agentState(context.Background(), r, goc, cluster, "argocd-agent")
		if err != nil {
			t.Fatal(err)
		}
		if image != want {
			t.Errorf("%s: image %q, want %q", cluster, image, want)
		}
	}
}
