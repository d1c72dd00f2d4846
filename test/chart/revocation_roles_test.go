package chart

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestRevokersCannotLiftAndLiftersCannotUnblock binds the chart's two revocation ClusterRoles in
// a principal namespace, as docs/pki.md tells, and asks a real API server. Who may revoke may
// create an AgentRevocation but not delete, edit or empty one (deleting it is what lifts a
// revocation). Who may lift may delete one there, none in another principal namespace, and
// write no ConfigMap or Secret of the namespace: the blocklist and the revocation record,
// which keep a certificate revoked for compromise blocked after the lift, stay the manager's.
func TestRevokersCannotLiftAndLiftersCannotUnblock(t *testing.T) {
	objs, err := render(t, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	admin := env.Client
	const ns, other, revoker, lifter = "principal", "other-principal", "security-team", "security-leads"
	for _, n := range []string{ns, other} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	bindings := map[string]string{revoker: releaseName + "-revoke-agents", lifter: releaseName + "-lift-revocations"}
	for group, role := range bindings {
		cr := find(objs, "ClusterRole", role)
		if cr == nil {
			t.Fatalf("the chart renders no ClusterRole %s", role)
		}
		if err := admin.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: group},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}}}); err != nil {
			t.Fatal(err)
		}
	}
	someoneOf := func(group string) testenv.Identity {
		return testenv.Identity{User: "someone-of-" + group, Groups: []string{group}}
	}
	review := func(group string, attrs authorizationv1.ResourceAttributes) bool {
		t.Helper()
		if attrs.Namespace == "" {
			attrs.Namespace = ns
		}
		allowed, _, err := someoneOf(group).Allowed(ctx, admin, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return allowed
	}
	revocations := func(verb, subresource string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: v1alpha1.GroupVersion.Group, Resource: "agentrevocations", Subresource: subresource, Name: "c1"}
	}
	inNS := func(attrs authorizationv1.ResourceAttributes) authorizationv1.ResourceAttributes {
		attrs.Namespace = ns
		return attrs
	}
	for group, right := range map[string]authorizationv1.ResourceAttributes{revoker: revocations("create", ""), lifter: revocations("delete", "")} {
		if err := someoneOf(group).AwaitAllowed(ctx, admin, testenv.RBACCatchUp, inNS(right)); err != nil {
			t.Fatalf("the revocation roles in effect: %v", err)
		}
	}

	for _, verb := range []string{"delete", "deletecollection", "update", "patch"} {
		for _, sub := range []string{"", "status"} {
			if verb == "deletecollection" && sub != "" {
				continue
			}
			if review(revoker, revocations(verb, sub)) {
				t.Errorf("who may revoke may %s agentrevocations %s", verb, sub)
			}
		}
	}
	// A revocation another principal namespace holds is lifted only by those bound there.
	elsewhere := revocations("delete", "")
	elsewhere.Namespace = other
	if review(lifter, elsewhere) {
		t.Errorf("who may lift in %s may delete agentrevocations in %s", ns, other)
	}
	secrets, configMaps := managerWritten()
	for resource, objects := range map[string][]string{"secrets": secrets, "configmaps": configMaps} {
		for _, name := range append(objects, "") {
			for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
				if review(lifter, authorizationv1.ResourceAttributes{Verb: verb, Resource: resource, Name: name}) {
					t.Errorf("who may lift may %s %s %q", verb, resource, name)
				}
			}
		}
	}

	// The same as real requests.
	as := func(group string) client.Client {
		c, err := client.New(someoneOf(group).Impersonating(env.Config), client.Options{Scheme: admin.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	rev := &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: v1alpha1.AgentRevocationSpec{Reason: "incident 7"}}
	if err := as(revoker).Create(ctx, rev); err != nil {
		t.Fatalf("who may revoke cannot create an AgentRevocation: %v", err)
	}
	if err := as(revoker).Delete(ctx, rev); !apierrors.IsForbidden(err) {
		t.Errorf("who may revoke deleting an AgentRevocation: want Forbidden, got %v", err)
	}
	blocklist := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ledger.BlocklistName}}
	if err := admin.Create(ctx, blocklist); err != nil {
		t.Fatal(err)
	}
	if err := as(lifter).Delete(ctx, blocklist); !apierrors.IsForbidden(err) {
		t.Errorf("who may lift deleting the blocklist: want Forbidden, got %v", err)
	}
	if err := as(lifter).Delete(ctx, rev); err != nil {
		t.Errorf("who may lift cannot delete the AgentRevocation: %v", err)
	}
}
