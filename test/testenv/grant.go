package testenv

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GrantCSRCreate lets cluster's agents create and read CertificateSigningRequests, as OCM's
// hub does for each cluster's group, and returns once the API server's authorizer applies the
// grant: RBAC objects take effect only when its informers see them, and a request made at once
// may still be refused.
func GrantCSRCreate(ctx context.Context, c client.Client, cluster string) error {
	group := "system:open-cluster-management:" + cluster
	name := "test-csr-create-" + cluster
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}}}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:open-cluster-management:" + cluster + ":agent",
			Groups: []string{group, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Verb: "create"},
		}}
		if err := c.Create(ctx, review); err != nil {
			return err
		}
		if review.Status.Allowed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the CSR grant for %s is not in effect after 30s: %s", group, review.Status.Reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
