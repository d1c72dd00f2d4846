package testenv

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Agent is the identity OCM's registration agent on cluster has on the hub: a user of the
// cluster's group and of the managed clusters' group.
func Agent(cluster string) Identity {
	group := "system:open-cluster-management:" + cluster
	return Identity{User: group + ":agent1", Groups: []string{group, "system:open-cluster-management:managed-clusters"}}
}

// GrantCSRCreate lets cluster's agents create and read CertificateSigningRequests, as OCM's
// hub does for each cluster's group, and returns once the API server's authorizer applies the
// grant.
func GrantCSRCreate(ctx context.Context, c client.Client, cluster string) error {
	group := "system:open-cluster-management:" + cluster
	name := "test-csr-create-" + cluster
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}}}
	agent := Agent(cluster)
	createCSR := authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Verb: "create"}
	return Grant(ctx, c, agent, []authorizationv1.ResourceAttributes{createCSR}, role, binding)
}
