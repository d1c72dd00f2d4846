package fleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// The hub's registration controller must not approve bootstrap CSRs on its own: it would not
// wait for the cluster's ManagedCluster (see acceptCluster).
func TestHubControllersDoNotAutoApprove(t *testing.T) {
	for name, args := range hubControllerArgs {
		for _, a := range args {
			if strings.Contains(a, "AutoApproval") || strings.Contains(a, "auto-approv") {
				t.Errorf("%s runs with %s", name, a)
			}
		}
	}
}

// A joining cluster's bootstrap CSR is approved only once its ManagedCluster exists, and then
// the cluster is accepted into the set; a CSR of anyone else for the same cluster, or one for
// another cluster's identity under its label, is left alone.
func TestAcceptClusterWaitsForTheManagedCluster(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true})
	ctx := context.Background()
	admin, err := client.New(env.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "csr-requester"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "csr-requester"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: bootstrapGroup}, {APIGroup: rbacv1.GroupName, Kind: "User", Name: "someone"}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	requestAs := func(subjectCluster, user string, groups ...string) *certificatesv1.CertificateSigningRequest {
		t.Helper()
		c, err := client.New(testenv.Identity{User: user, Groups: groups}.Impersonating(env.Config), client.Options{Scheme: Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{
			CommonName: "system:open-cluster-management:" + subjectCluster + ":abcde", Organization: []string{"system:open-cluster-management:" + subjectCluster}}}, key)
		if err != nil {
			t.Fatal(err)
		}
		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "cluster1-", Labels: map[string]string{clusterv1.ClusterNameLabelKey: "cluster1"}},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeAPIServerClientSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
			},
		}
		// The RBAC authorizer sees the new binding through an informer.
		poll.Until(t, user+" to create a CSR", 2*time.Minute, func() error { return c.Create(ctx, csr) })
		return csr
	}
	agent := requestAs("cluster1", BootstrapUser, bootstrapGroup)
	other := requestAs("cluster1", "someone")
	// The bootstrap identity is shared by every cluster: a request labelled cluster1 for
	// cluster2's identity is not cluster1's.
	forged := requestAs("cluster2", BootstrapUser, bootstrapGroup)

	if done, err := acceptCluster(ctx, admin, "cluster1", "fleet"); err != nil || done {
		t.Fatalf("accepted a cluster with no ManagedCluster: done=%v err=%v", done, err)
	}
	if state := stateOf(t, admin, agent); state != "" {
		t.Fatalf("the CSR was %s before the ManagedCluster existed", state)
	}

	if err := admin.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}}); err != nil {
		t.Fatal(err)
	}
	if done, err := acceptCluster(ctx, admin, "cluster1", "fleet"); err != nil || !done {
		t.Fatalf("accept once the ManagedCluster exists: done=%v err=%v", done, err)
	}
	if state := stateOf(t, admin, agent); state != certificatesv1.CertificateApproved {
		t.Errorf("the agent's bootstrap CSR is %q, want Approved", state)
	}
	if state := stateOf(t, admin, other); state != "" {
		t.Errorf("a CSR of another user for the cluster was %s", state)
	}
	if state := stateOf(t, admin, forged); state != "" {
		t.Errorf("a CSR labelled cluster1 for cluster2's identity was %s", state)
	}
	mc := &clusterv1.ManagedCluster{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "cluster1"}, mc); err != nil {
		t.Fatal(err)
	}
	if !mc.Spec.HubAcceptsClient || mc.Labels[clusterv1beta2.ClusterSetLabel] != "fleet" {
		t.Errorf("ManagedCluster accepted=%v labels=%v, want accepted into set fleet", mc.Spec.HubAcceptsClient, mc.Labels)
	}
}

func stateOf(t *testing.T, c client.Client, csr *certificatesv1.CertificateSigningRequest) certificatesv1.RequestConditionType {
	t.Helper()
	got := &certificatesv1.CertificateSigningRequest{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(csr), got); err != nil {
		t.Fatal(err)
	}
	return csrState(got)
}
