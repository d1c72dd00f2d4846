package chart

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestManagedClusterAgentLabelPolicy: OCM lets a cluster's registration agent update its own
// ManagedCluster, labels included, and bootstrap identities create it. The chart's policy keeps
// them from setting, changing or removing the project's labels (such as the cluster's pull-model
// Argo CD namespace), which the hub admin alone sets; their other labels and updates pass.
func TestManagedClusterAgentLabelPolicy(t *testing.T) {
	p := startAgentPolicy(t)
	ctx, admin, agent, bootstrap, patch := p.ctx, p.admin, p.agent, p.bootstrap, p.patch
	set := `{"metadata":{"labels":{"` + propagation.LabelSpokeNamespace + `":"openshift-gitops"}}}`
	// The policy takes effect once the API server has loaded it: wait for a refusal.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := patch(agent, set)
		if err != nil && strings.Contains(err.Error(), "they are the hub admin's") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster's agent set its pull-model namespace: %v", err)
		}
		_ = patch(admin, `{"metadata":{"labels":{"`+propagation.LabelSpokeNamespace+`":null}}}`)
		time.Sleep(200 * time.Millisecond)
	}
	if err := patch(admin, set); err != nil {
		t.Fatalf("the hub admin was refused: %v", err)
	}
	for name, body := range map[string]string{
		"changing the namespace label":        `{"metadata":{"labels":{"` + propagation.LabelSpokeNamespace + `":"argocd"}}}`,
		"removing the namespace label":        `{"metadata":{"labels":{"` + propagation.LabelSpokeNamespace + `":null}}}`,
		"opting itself out of the components": `{"metadata":{"labels":{"argocd-agent-addon.open-cluster-management.io/argocd-components":"Existing"}}}`,
		"clearing itself for the components":  `{"metadata":{"labels":{"argocd-agent-addon.open-cluster-management.io/components-abc":"true"}}}`,
	} {
		if err := patch(agent, body); err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("agent %s: allowed (%v)", name, err)
		}
	}
	// The agent's other updates pass, with the project's label left as it is.
	if err := patch(agent, `{"metadata":{"labels":{"env":"dev"}}}`); err != nil {
		t.Errorf("the agent's own label was refused: %v", err)
	}
	got := &clusterv1.ManagedCluster{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "mc2"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[propagation.LabelSpokeNamespace] != "openshift-gitops" {
		t.Errorf("labels %v: the hub admin's value changed", got.Labels)
	}
	// A bootstrap identity cannot create a ManagedCluster that carries one.
	withLabel := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "mc3", Labels: map[string]string{propagation.LabelSpokeNamespace: "kube-system"}}}
	if err := bootstrap.Create(ctx, withLabel); err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("bootstrap created a ManagedCluster with the project's label (%v)", err)
	}
	if err := bootstrap.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "mc4", Labels: map[string]string{"env": "prod"}}}); err != nil {
		t.Errorf("bootstrap was refused a plain ManagedCluster: %v", err)
	}
}

// TestManagedClusterAgentImageRegistriesPolicy: OCM's image-registries annotation on a
// ManagedCluster moves the images of the cluster's agent and Argo CD components to its mirrors.
// OCM lets the cluster's own identities write their ManagedCluster's annotations; the chart's
// policy keeps them from setting, changing or removing that one, so that a cluster cannot point
// its own components at images of its choosing. The hub (here its admin) still sets it, and the
// agent's other annotations pass.
func TestManagedClusterAgentImageRegistriesPolicy(t *testing.T) {
	p := startAgentPolicy(t)
	ctx, admin, agent, bootstrap, patch := p.ctx, p.admin, p.agent, p.bootstrap, p.patch
	const key = clusterv1.ClusterImageRegistriesAnnotationKey
	annotate := func(value string) string {
		if value == "" {
			return `{"metadata":{"annotations":{"` + key + `":null}}}`
		}
		raw, err := json.Marshal(value)
		if err != nil {
			t.Fatal(err)
		}
		return `{"metadata":{"annotations":{"` + key + `":` + string(raw) + `}}}`
	}
	attacker := annotate(`{"registries":[{"source":"quay.io/argoproj","mirror":"attacker.example.com/argoproj"}]}`)
	// The policy takes effect once the API server has loaded it: wait for a refusal.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := patch(agent, attacker)
		if err != nil && strings.Contains(err.Error(), "it decides where the cluster's images come from") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster's agent set its image mirrors: %v", err)
		}
		_ = patch(admin, annotate(""))
		time.Sleep(200 * time.Millisecond)
	}
	hubs := `{"registries":[{"source":"quay.io/argoproj","mirror":"mirror.example.com/argoproj"}]}`
	if err := patch(admin, annotate(hubs)); err != nil {
		t.Fatalf("the hub admin was refused: %v", err)
	}
	for name, body := range map[string]string{
		"changing the mirrors": attacker,
		"removing the mirrors": annotate(""),
	} {
		if err := patch(agent, body); err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("agent %s: allowed (%v)", name, err)
		}
	}
	if err := patch(agent, `{"metadata":{"annotations":{"example.com/note":"the agent's own"}}}`); err != nil {
		t.Errorf("the agent's own annotation was refused: %v", err)
	}
	got := &clusterv1.ManagedCluster{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "mc2"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[key] != hubs {
		t.Errorf("annotations %v: the hub's mirrors changed", got.Annotations)
	}
	// A bootstrap identity cannot create a ManagedCluster that carries them.
	withMirrors := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "mc3", Annotations: map[string]string{key: hubs}}}
	if err := bootstrap.Create(ctx, withMirrors); err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("bootstrap created a ManagedCluster with image mirrors (%v)", err)
	}
}

// agentPolicy is the chart's policy on a cluster's own identities, loaded into a real API server
// with the rights OCM grants them, and ManagedCluster mc2 to try it on.
type agentPolicy struct {
	ctx                     context.Context
	admin, agent, bootstrap client.Client
	patch                   func(c client.Client, body string) error
}

func startAgentPolicy(t *testing.T) agentPolicy {
	t.Helper()
	objs, err := render(t, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true})
	ctx := context.Background()
	admin := env.Client
	n := 0
	for _, o := range objs {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && strings.HasSuffix(o.GetName(), "-managedcluster-agent-labels") {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatalf("creating %s: %v", o.GetKind(), err)
			}
			n++
		}
	}
	if n != 2 {
		t.Fatalf("rendered %d agent label policy objects, want a policy and its binding", n)
	}
	// What OCM grants: the agent updates its own ManagedCluster, bootstrap creates one.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "mc-agent"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"get", "create", "update", "patch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mc-agent"},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "mc-agent"},
		Subjects: []rbacv1.Subject{
			{Kind: "Group", Name: "system:open-cluster-management:managed-clusters"},
			{Kind: "Group", Name: "system:bootstrappers:managedcluster"},
		}}
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "mc2", Labels: map[string]string{"env": "prod"}},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
	for _, o := range []client.Object{role, binding, mc} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string, groups ...string) client.Client {
		c, err := client.New(testenv.Identity{User: user, Groups: groups}.Impersonating(env.Config), client.Options{Scheme: admin.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	agent := as("system:open-cluster-management:mc2:agent1", "system:open-cluster-management:mc2", "system:open-cluster-management:managed-clusters")
	bootstrap := as("system:bootstrap:abcdef", "system:bootstrappers", "system:bootstrappers:managedcluster")
	patch := func(c client.Client, body string) error {
		return c.Patch(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "mc2"}}, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	return agentPolicy{ctx, admin, agent, bootstrap, patch}
}
