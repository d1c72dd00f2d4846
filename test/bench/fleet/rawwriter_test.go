package main

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// The raw CSR pace ends when its informer has seen every certificate: a CSR seen again (an
// update, a resync) counts once, and one without a certificate not at all.
func TestSeenObjectsCountsEachObjectOnce(t *testing.T) {
	certified := newSeenObjects("CSRs with a certificate")
	h := certified.handler(func(obj any) bool {
		return len(obj.(*certificatesv1.CertificateSigningRequest).Status.Certificate) > 0
	})
	csr := func(name string, cert bool) *certificatesv1.CertificateSigningRequest {
		c := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if cert {
			c.Status.Certificate = []byte("cert")
		}
		return c
	}
	done := certified.atLeast(2)
	h.OnAdd(csr("a", false), false)
	h.OnUpdate(csr("a", false), csr("a", true))
	h.OnUpdate(csr("a", true), csr("a", true))
	h.OnAdd(csr("b", false), false)
	if ok, state := done(context.Background()); ok || state != "1 of 2 CSRs with a certificate" {
		t.Fatalf("after one certificate: done %v, state %q", ok, state)
	}
	h.OnUpdate(csr("b", false), csr("b", true))
	if ok, _ := done(context.Background()); !ok {
		t.Fatal("after two certificates: not done")
	}
}

// The raw writer's baseline must pay for RBAC as the manager does: credentials that may do
// anything (the admin's system:masters, or the writer bound to cluster-admin) are refused, and
// the writer with the chart-shaped rights it is given is accepted.
func TestRawWriterRefusesCredentialsThatMayDoAnything(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	if err := refuseAllPowerful(ctx, env.Config); err == nil {
		t.Error("the admin's credentials (system:masters) were accepted as a raw writer's")
	}
	cfg, err := rawWriterConfig(ctx, env)
	if err != nil {
		t.Fatalf("the raw writer with its own rights: %v", err)
	}
	admin := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rawWriterName + "-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: rawWriterSubjects()}
	if err := testenv.Grant(ctx, env.Client, rawWriterID, []authorizationv1.ResourceAttributes{testenv.AnyRequest}, admin); err != nil {
		t.Fatal(err)
	}
	if err := refuseAllPowerful(ctx, cfg); err == nil {
		t.Error("the raw writer bound to cluster-admin was accepted")
	}
}
