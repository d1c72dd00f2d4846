package gitopscluster_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

const addonName = "argocd-agent-addon"

func clusterSecrets(t *testing.T, ns string) sets.Set[string] {
	t.Helper()
	var list corev1.SecretList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelSecretType: "cluster"}); err != nil {
		t.Fatal(err)
	}
	out := sets.New[string]()
	for _, s := range list.Items {
		out.Insert(s.Name)
	}
	return out
}

func waitClusterSecrets(t *testing.T, ns string, want ...string) {
	t.Helper()
	eventually(t, "cluster secrets in "+ns, func() error {
		got := clusterSecrets(t, ns)
		if !got.Equal(sets.New(want...)) {
			return fmt.Errorf("have %v, want %v", sets.List(got), want)
		}
		return nil
	})
}

func cmaEntries(t *testing.T) map[string]addonv1alpha1.PlacementStrategy {
	t.Helper()
	cma := &addonv1alpha1.ClusterManagementAddOn{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: addonName}, cma); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	out := map[string]addonv1alpha1.PlacementStrategy{}
	for _, p := range cma.Spec.InstallStrategy.Placements {
		out[p.Namespace+"/"+p.Name] = p
	}
	return out
}

func TestMissingPlacementIsReportedAndPickedUpWhenCreated(t *testing.T) {
	t.Parallel()
	ns := "missing-placement"
	createNamespace(t, ns)
	createManagedClusters(t, "mp-c1")
	createGitOpsCluster(t, ns, "fleet", "later", withAddress("principal.example.com"))

	g := conditionIs(t, ns, "fleet", v1alpha1.ConditionPlacementResolved, metav1.ConditionFalse, v1alpha1.ReasonPlacementNotFound)
	if c := findCond(g, v1alpha1.ConditionPlacementResolved); !strings.Contains(c.Message, "later") {
		t.Errorf("message does not name the Placement: %q", c.Message)
	}
	conditionIs(t, ns, "fleet", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotReady)

	createPlacement(t, ns, "later")
	setDecisions(t, ns, "later", 1, "mp-c1")
	conditionIs(t, ns, "fleet", v1alpha1.ConditionPlacementResolved, metav1.ConditionTrue, v1alpha1.ReasonPlacementResolved)
	eventually(t, "one cluster selected", func() error {
		if n := getGOC(t, ns, "fleet").Status.SelectedClusters; n != 1 {
			return fmt.Errorf("selectedClusters = %d, want 1", n)
		}
		return nil
	})
	waitClusterSecrets(t, ns, "cluster-mp-c1")

	// The Placement goes away: the counts go with it, not the last ones seen.
	ctx := context.Background()
	if err := k8s.Delete(ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"}}); err != nil {
		t.Fatal(err)
	}
	conditionIs(t, ns, "fleet", v1alpha1.ConditionPlacementResolved, metav1.ConditionFalse, v1alpha1.ReasonPlacementNotFound)
	eventually(t, "counts cleared", func() error {
		if st := getGOC(t, ns, "fleet").Status; st.SelectedClusters != 0 || st.AvailableAgents != 0 || len(st.UnavailableClusters) != 0 {
			return fmt.Errorf("selected %d, available %d, unavailable %v", st.SelectedClusters, st.AvailableAgents, st.UnavailableClusters)
		}
		return nil
	})
}

func TestDecisionsOverSeveralPagesAndPlacementEdits(t *testing.T) {
	t.Parallel()
	ns := "paged"
	createNamespace(t, ns)
	createManagedClusters(t, "pg-a", "pg-b", "pg-c", "pg-d")
	createPlacement(t, ns, "spread")
	setDecisions(t, ns, "spread", 1, "pg-a", "pg-b")
	setDecisions(t, ns, "spread", 2, "pg-c")
	createGitOpsCluster(t, ns, "fleet", "spread", withAddress("10.1.2.3"))

	eventually(t, "three clusters selected", func() error {
		if n := getGOC(t, ns, "fleet").Status.SelectedClusters; n != 3 {
			return fmt.Errorf("selectedClusters = %d", n)
		}
		return nil
	})
	waitClusterSecrets(t, ns, "cluster-pg-a", "cluster-pg-b", "cluster-pg-c")

	// The user edits the Placement: pg-b leaves, pg-d joins.
	setDecisions(t, ns, "spread", 1, "pg-a", "pg-d")
	waitClusterSecrets(t, ns, "cluster-pg-a", "cluster-pg-c", "cluster-pg-d")
	if n := getGOC(t, ns, "fleet").Status.SelectedClusters; n != 3 {
		t.Errorf("selectedClusters = %d after the edit", n)
	}

	// The cluster secret is what argocd-agent's principal expects.
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "cluster-pg-a"}, s); err != nil {
		t.Fatal(err)
	}
	if s.Labels["argocd.argoproj.io/secret-type"] != "cluster" || s.Labels["argocd-agent.argoproj-labs.io/agent-name"] != "pg-a" ||
		s.Annotations["argocd.argoproj.io/skip-reconcile"] != "true" {
		t.Errorf("labels/annotations: %v %v", s.Labels, s.Annotations)
	}
	if string(s.Data["name"]) != "pg-a" || string(s.Data["server"]) != "https://argocd-agent-resource-proxy."+ns+".svc:9090?agentName=pg-a" {
		t.Errorf("name/server: %q %q", s.Data["name"], s.Data["server"])
	}
	var cfg struct {
		TLSClientConfig struct{ CertData, KeyData, CAData []byte } `json:"tlsClientConfig"`
	}
	if err := json.Unmarshal(s.Data["config"], &cfg); err != nil {
		t.Fatal(err)
	}
	kp, err := pki.ParseKeyPair(cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	if kp.Cert.Subject.CommonName != "pg-a" || len(kp.Cert.ExtKeyUsage) != 1 || kp.Cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("client cert subject %s usages %v", kp.Cert.Subject, kp.Cert.ExtKeyUsage)
	}
	roots, _ := pki.ParseCertificates(cfg.TLSClientConfig.CAData)
	if err := pki.VerifyChain(kp.Cert, roots, x509.ExtKeyUsageClientAuth, clock.Now()); err != nil {
		t.Errorf("client cert does not chain to caData: %v", err)
	}

	// A failed or partial read never tears anything down: deleting the Placement makes the
	// selection unknown, and the secrets stay.
	if err := k8s.Delete(context.Background(), &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spread"}}); err != nil {
		t.Fatal(err)
	}
	conditionIs(t, ns, "fleet", v1alpha1.ConditionPlacementResolved, metav1.ConditionFalse, v1alpha1.ReasonPlacementNotFound)
	if got := clusterSecrets(t, ns); got.Len() != 3 {
		t.Errorf("secrets were torn down on an unknown selection: %v", sets.List(got))
	}
}

func TestInvalidClusterNameIsSkippedAndReported(t *testing.T) {
	t.Parallel()
	ns := "invalid-names"
	createNamespace(t, ns)
	long := strings.Repeat("x", 64)
	createManagedClusters(t, "iv-ok", "iv.dotted", long)
	createPlacement(t, ns, "p")
	// A cluster named like the principal namespace would collide with it on the principal.
	setDecisions(t, ns, "p", 1, "iv-ok", "iv.dotted", long, ns)
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))

	waitClusterSecrets(t, ns, "cluster-iv-ok")
	g := conditionIs(t, ns, "fleet", v1alpha1.ConditionPlacementResolved, metav1.ConditionTrue, "")
	msg := findCond(g, v1alpha1.ConditionPlacementResolved).Message
	for _, bad := range []string{"iv.dotted", long, ns} {
		if !strings.Contains(msg, bad) {
			t.Errorf("PlacementResolved message does not report %q: %s", bad, msg)
		}
	}
	reported := sets.New[string]()
	for _, u := range g.Status.UnavailableClusters {
		if u.Reason == "InvalidAgentName" {
			reported.Insert(u.Name)
		}
		// The message must say what is wrong with this name.
		if u.Name == ns && !strings.Contains(u.Message, "equals the principal namespace") {
			t.Errorf("%s: message %q does not say why", u.Name, u.Message)
		}
		if u.Name == long && !strings.Contains(u.Message, "63") {
			t.Errorf("%s: message %q does not say why", u.Name, u.Message)
		}
	}
	if !reported.Equal(sets.New("iv.dotted", long, ns)) {
		t.Errorf("unavailableClusters with InvalidAgentName = %v", sets.List(reported))
	}
}

func findCond(g *v1alpha1.GitOpsCluster, t string) *metav1.Condition {
	for i := range g.Status.Conditions {
		if g.Status.Conditions[i].Type == t {
			return &g.Status.Conditions[i]
		}
	}
	return &metav1.Condition{}
}
