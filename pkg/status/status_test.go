package status

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
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

// The status command knows both supported pairs: it names the Argo CD release each agent is
// built against, and says when the components installed beside it are not that release or when
// the agent's release is not supported at all.
func TestStatusNamesThePairOfEachAgent(t *testing.T) {
	for _, c := range []struct{ agent, argoCD, want string }{
		{"quay.io/argoprojlabs/argocd-agent:v0.10.0", "quay.io/argoproj/argocd:v3.5.0", "argocd-agent v0.10.0, built against Argo CD v3.5.0; Argo CD components v3.5.0"},
		{"mirror.example.com/argoprojlabs/argocd-agent:v0.9.0", "mirror.example.com/argoproj/argocd:v3.4.3", "argocd-agent v0.9.0, built against Argo CD v3.4.3; Argo CD components v3.4.3"},
		{"quay.io/argoprojlabs/argocd-agent:v0.9.0", "quay.io/argoproj/argocd:v3.5.0", "argocd-agent v0.9.0, built against Argo CD v3.4.3; Argo CD components v3.5.0, not the agent's pair"},
		{"quay.io/argoprojlabs/argocd-agent:v0.10.0", "", "argocd-agent v0.10.0, built against Argo CD v3.5.0; Argo CD: the clusters' own"},
		{"quay.io/argoprojlabs/argocd-agent:v0.10.1", "quay.io/argoproj/argocd:v3.5.0",
			"argocd-agent v0.10.1 is not a supported release (supported: v0.10.0 with Argo CD v3.5.0, v0.9.0 with Argo CD v3.4.3); Argo CD components v3.5.0"},
	} {
		if got := describeVersions(c.agent, c.argoCD); got != c.want {
			t.Errorf("%s with %q:\n got  %s\n want %s", c.agent, c.argoCD, got, c.want)
		}
	}

	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gitops", UID: "goc-uid"},
		Spec:   v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: "p"}},
		Status: v1alpha1.GitOpsClusterStatus{AddOnDeploymentConfig: "current"}}
	goc.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("GitOpsCluster"))
	owner := []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "GitOpsCluster", Name: goc.Name, UID: goc.UID, Controller: ptr.To(true)}}
	adc := func(name, agent string) *addonv1alpha1.AddOnDeploymentConfig {
		return &addonv1alpha1.AddOnDeploymentConfig{ObjectMeta: metav1.ObjectMeta{Namespace: goc.Namespace, Name: name, OwnerReferences: owner},
			Spec: addonv1alpha1.AddOnDeploymentConfigSpec{CustomizedVariables: []addonv1alpha1.CustomizedVariable{
				{Name: addon.VarAgentImage, Value: agent}, {Name: addon.VarArgoCDImage, Value: "quay.io/argoproj/argocd:v3.5.0"}}}}
	}
	mca := func(cluster, config string) *addonv1alpha1.ManagedClusterAddOn {
		return &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: "argocd-agent"},
			Status: addonv1alpha1.ManagedClusterAddOnStatus{ConfigReferences: []addonv1alpha1.ConfigReference{{
				ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: "addondeploymentconfigs"},
				LastAppliedConfig:   &addonv1alpha1.ConfigSpecHash{ConfigReferent: addonv1alpha1.ConfigReferent{Namespace: goc.Namespace, Name: config}},
			}}}}
	}
	decisions := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: goc.Namespace, Name: "p-decision-1",
		Labels: map[string]string{clusterv1beta1.PlacementLabel: "p"}},
		Status: clusterv1beta1.PlacementDecisionStatus{Decisions: []clusterv1beta1.ClusterDecision{{ClusterName: "c-new"}, {ClusterName: "c-old"}}}}
	// Mid-upgrade: the current config runs v0.10.0, one cluster still runs v0.9.0's.
	r := fake.NewClientBuilder().WithScheme(scheme).WithObjects(goc, decisions,
		adc("current", "quay.io/argoprojlabs/argocd-agent:v0.10.0"), adc("previous", "quay.io/argoprojlabs/argocd-agent:v0.9.0"),
		mca("c-new", "current"), mca("c-old", "previous")).Build()
	var out strings.Builder
	if err := Print(context.Background(), r, &out, Options{AddonName: "argocd-agent", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"argocd-agent v0.10.0, built against Argo CD v3.5.0; Argo CD components v3.5.0", "BUILT AGAINST"} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q:\n%s", want, text)
		}
	}
	for cluster, want := range map[string]string{"c-new": "Argo CD v3.5.0", "c-old": "Argo CD v3.4.3"} {
		found := false
		for _, l := range strings.Split(text, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == cluster {
				found = strings.Contains(l, want)
			}
		}
		if !found {
			t.Errorf("%s's row does not say %q:\n%s", cluster, want, text)
		}
	}
}
