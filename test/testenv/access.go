package testenv

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// RBACCatchUp bounds how long a new grant may take to reach the API server's authorizer: it
// learns of RBAC objects through its informers, which a busy machine (the whole suite at once)
// delays by many seconds.
const RBACCatchUp = 2 * time.Minute

// Identity is a user as the API server's authorizer sees it. Questions about it are asked by
// an admin's client (SubjectAccessReview), so it needs no credentials of its own.
type Identity struct {
	User string
	// Groups are the groups its credentials name; system:authenticated, which the API
	// server adds to every authenticated user, is left out.
	Groups []string
}

// ServiceAccount is the identity the API server gives ServiceAccount ns/name.
func ServiceAccount(ns, name string) Identity {
	return Identity{User: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}
}

// Impersonating returns a copy of the admin's cfg that acts as id, with the groups the API
// server would give id's own credentials: what RBAC grants id is all the copy may do.
func (id Identity) Impersonating(cfg *rest.Config) *rest.Config {
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: id.User, Groups: append(append([]string{}, id.Groups...), "system:authenticated")}
	return as
}

// Allowed asks the API server, through the admin client c, whether id may do what attrs say.
// reason is the authorizer's, when it gives one.
func (id Identity) Allowed(ctx context.Context, c client.Client, attrs authorizationv1.ResourceAttributes) (allowed bool, reason string, err error) {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: id.User, Groups: append(append([]string{}, id.Groups...), "system:authenticated"), ResourceAttributes: &attrs}}
	if err := c.Create(ctx, review); err != nil {
		return false, "", err
	}
	return review.Status.Allowed, review.Status.Reason, nil
}

// SelfAllowed asks the API server, with cfg's own credentials (SelfSubjectAccessReview), whether
// they may do what attrs say: what a client certificate or token carries is what is checked,
// where Identity.Allowed checks a declared user and groups.
func SelfAllowed(ctx context.Context, cfg *rest.Config, attrs authorizationv1.ResourceAttributes) (allowed bool, reason string, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, "", err
	}
	review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
		&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	return review.Status.Allowed, review.Status.Reason, nil
}

// AnyRequest is every verb on every resource of every group: only a user RBAC does not
// constrain (system:masters) or one bound to cluster-admin may do it.
var AnyRequest = authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}

// AwaitAllowed returns once id may do each of rights, waiting up to limit for each: RBAC
// objects take effect only when the authorizer's informers have seen them. A review the API
// server refuses outright (c may not ask, or the question is malformed) ends the wait at once.
func (id Identity) AwaitAllowed(ctx context.Context, c client.Client, limit time.Duration, rights ...authorizationv1.ResourceAttributes) error {
	for _, right := range rights {
		var refused error
		err := poll.Wait(ctx, limit, func(ctx context.Context) (bool, string) {
			allowed, reason, err := id.Allowed(ctx, c, right)
			switch {
			case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
				refused = err
				return true, ""
			case err != nil:
				return false, err.Error()
			}
			return allowed, fmt.Sprintf("%s may not %s", id.User, describe(right)) + because(reason)
		})
		if refused != nil {
			return fmt.Errorf("asking whether %s may %s: %w", id.User, describe(right), refused)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Grant creates the RBAC objects objs through the admin client c, leaving any that exist, and
// returns once the authorizer lets id do each of rights.
func Grant(ctx context.Context, c client.Client, id Identity, rights []authorizationv1.ResourceAttributes, objs ...client.Object) error {
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return id.AwaitAllowed(ctx, c, RBACCatchUp, rights...)
}

// describe names a request: verb, group/resource[/subresource], name and namespace when set.
func describe(a authorizationv1.ResourceAttributes) string {
	s := a.Verb + " " + a.Group + "/" + a.Resource
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Namespace != "" {
		s += " in " + a.Namespace
	}
	return s
}

func because(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}
