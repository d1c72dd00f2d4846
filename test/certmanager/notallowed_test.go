package certmanager_test

import (
	"testing"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// A manager installed without certManager.enabled may do everything it needs but touch
// cert-manager's kinds: a GitOpsCluster that names an issuer says so in its condition
// (CertManagerNotAllowed) instead of failing every reconcile.
func TestCertManagerNotAllowedIsACondition(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
	env := testenv.StartForTest(t, testenv.Options{WithCertManager: true})
	admin := env.Client

	// Every API group the hub serves but cert-manager's.
	groups, err := discovery.NewDiscoveryClientForConfigOrDie(env.Config).ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var allowed []string
	for _, g := range groups.Groups {
		if g.Name != "cert-manager.io" && g.Name != "acme.cert-manager.io" {
			allowed = append(allowed, g.Name)
		}
	}
	const user = "argocd-agent-addon-without-cert-manager"
	mustCreate(t, admin,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
			{APIGroups: allowed, Resources: []string{"*"}, Verbs: []string{"*"}},
			{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "placement"}},
		&v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
			Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: "placement"},
				ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{PrincipalServerAddress: "principal.example.com",
					CertManager: &v1alpha1.CertManagerPKI{IssuerRef: v1alpha1.CertManagerIssuerReference{Name: "corp-ca"}}}}},
	)

	defer startManager(t, testenv.Identity{User: user}.Impersonating(env.Config))()

	waitCondition(t, admin, ns, v1alpha1.ReasonCertManagerNotAllowed, "certManager.enabled=true")
}
