package gitopscluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// TestPrincipalNamespaceOutsideManagedNamespaces runs one reconcile with a manager limited to
// other namespaces: the GitOpsCluster says why nothing was issued, and no Secret is written.
func TestPrincipalNamespaceOutsideManagedNamespaces(t *testing.T) {
	ctx := context.Background()
	ns := "unmanaged"
	createNamespace(t, ns)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1)

	stopManager()
	defer startManager()
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	cfg := testConfig()
	cfg.ManagedNamespaces = []string{"somewhere-else"}
	r := &gitopscluster.Reconciler{Client: k8s, Config: cfg}
	key := types.NamespacedName{Namespace: ns, Name: "fleet"}
	for range 2 { // the first pass adds the finalizer
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	g := getGOC(t, ns, "fleet")
	c := findCond(g, v1alpha1.ConditionCertificatesReady)
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonNamespaceNotManaged || !strings.Contains(c.Message, "--managed-namespaces") {
		t.Errorf("CertificatesReady = %s/%s: %s", c.Status, c.Reason, c.Message)
	}
	if r := findCond(g, v1alpha1.ConditionReady); r.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %s", r.Status)
	}
	if s := clusterSecrets(t, ns); s.Len() > 0 {
		t.Errorf("secrets written: %v", s.UnsortedList())
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.CASecretName}, &corev1.Secret{}); err == nil {
		t.Error("a CA secret was written in an unmanaged namespace")
	}
}

// TestGitOpsClusterOutsideManagedNamespacesCanBeDeleted: with the binary's cache (Secrets only
// in the managed namespaces), a GitOpsCluster whose principal namespace is elsewhere still
// gets its finalizer removed when deleted.
func TestGitOpsClusterOutsideManagedNamespacesCanBeDeleted(t *testing.T) {
	ctx := context.Background()
	ns := "unmanaged-delete"
	createNamespace(t, ns)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 0)
	stopManager()
	startManagerWith(func(o *manager.Options) { o.Fleet.ManagedNamespaces = []string{"somewhere-else"} })
	defer func() { stopManager(); startManager() }()

	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotManaged)
	if err := k8s.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the GitOpsCluster is gone", func() error {
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fleet"}, &v1alpha1.GitOpsCluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}
