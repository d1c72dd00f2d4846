package main

import (
	"context"
	"fmt"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// rawWriterName names the raw writer's user, a ServiceAccount's name, and its roles.
const rawWriterName = "bench-raw-writer"

// rawWriterID is the raw writer's identity: a ServiceAccount's user in the manager's namespace
// (no ServiceAccount object is needed for a client certificate).
var rawWriterID = testenv.ServiceAccount(releaseNamespace, rawWriterName)

// rawWriterConfig returns the raw writer's connection. It has no client-side rate limit (the
// raw phases measure the API server, not client-go's limiter) and authenticates as rawWriterID,
// with RBAC of the shape the chart gives the manager, so that RBAC authorizes each of its
// requests as it does the manager's, where system:masters would skip it. On the cluster it may
// read and watch CSRs, and approve and sign for its own signer only; grantRawWriter adds a
// namespace. With --admin the manager runs as system:masters, and so does the raw writer.
func rawWriterConfig(ctx context.Context, env *testenv.Env) (*rest.Config, error) {
	if asAdmin {
		return unthrottled(env.Config), nil
	}
	group := []string{certificatesv1.GroupName}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: rawWriterName}, Rules: []rbacv1.PolicyRule{
		{APIGroups: group, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"list", "watch"}},
		{APIGroups: group, Resources: []string{"certificatesigningrequests/approval", "certificatesigningrequests/status"}, Verbs: []string{"update"}},
		{APIGroups: group, Resources: []string{"signers"}, ResourceNames: []string{rawSigner}, Verbs: []string{"approve", "sign"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rawWriterName},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: rawWriterSubjects()}
	sign := authorizationv1.ResourceAttributes{Verb: "sign", Group: certificatesv1.GroupName, Resource: "signers", Name: rawSigner}
	if err := testenv.Grant(ctx, env.Client, rawWriterID, []authorizationv1.ResourceAttributes{sign}, role, binding); err != nil {
		return nil, fmt.Errorf("the raw writer's rights: %w", err)
	}
	cfg, err := env.UserConfig(rawWriterID.User, rawWriterID.Groups...)
	if err != nil {
		return nil, err
	}
	cfg = unthrottled(cfg)
	if err := refuseAllPowerful(ctx, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// refuseAllPowerful fails if cfg's credentials may do anything: a raw writer that skips RBAC
// and API Priority and Fairness (system:masters) would flatter the baseline. It asks with
// those credentials, so that what they carry is what is checked.
func refuseAllPowerful(ctx context.Context, cfg *rest.Config) error {
	allowed, _, err := testenv.SelfAllowed(ctx, cfg, testenv.AnyRequest)
	if err != nil {
		return fmt.Errorf("asking what the raw writer may do: %w", err)
	}
	if allowed {
		return fmt.Errorf("the raw writer may do anything: its baseline would not pay for RBAC")
	}
	return nil
}

// grantRawWriter lets the raw writer create Secrets and update ConfigMaps in ns, and list and
// watch both, by a Role bound there, as the chart grants the manager its managed namespaces.
// It returns once the API server's authorizer allows it.
func grantRawWriter(ctx context.Context, env *testenv.Env, ns string) error {
	if asAdmin {
		return nil
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rawWriterName}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update", "list", "watch"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rawWriterName},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: rawWriterSubjects()}
	rights := []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "create", Resource: "secrets"},
		{Namespace: ns, Verb: "update", Resource: "configmaps"},
	}
	if err := testenv.Grant(ctx, env.Client, rawWriterID, rights, role, binding); err != nil {
		return fmt.Errorf("the raw writer's rights in %s: %w", ns, err)
	}
	return nil
}

func rawWriterSubjects() []rbacv1.Subject {
	return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: releaseNamespace, Name: rawWriterName}}
}

// seenObjects counts the distinct objects an informer has delivered that meet a condition, in
// its event handler: resyncs and repeated updates count once, and asking for the count copies
// nothing (listing a store of 10,000 keys every few milliseconds would take CPU from the cores
// the API server needs in the phase it measures).
type seenObjects struct {
	what string
	mu   sync.Mutex
	keys map[string]bool
}

func newSeenObjects(what string) *seenObjects {
	return &seenObjects{what: what, keys: map[string]bool{}}
}

// handler records each object that meets accepts.
func (s *seenObjects) handler(meets func(obj any) bool) cache.ResourceEventHandler {
	note := func(obj any) {
		if !meets(obj) {
			return
		}
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.keys[key] = true
		s.mu.Unlock()
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, obj any) { note(obj) }}
}

// atLeast is a poll condition: s has seen n objects.
func (s *seenObjects) atLeast(n int) func(context.Context) (bool, string) {
	return func(context.Context) (bool, string) {
		s.mu.Lock()
		seen := len(s.keys)
		s.mu.Unlock()
		if seen >= n {
			return true, ""
		}
		return false, fmt.Sprintf("%d of %d %s", seen, n, s.what)
	}
}
