package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const (
	principalNS       = "argocd"
	principalSA       = "argocd-agent-principal"
	principalIdentity = "argocd-agent-principal-identity"
)

// principalCall is one Kubernetes request argocd-agent's principal makes, and where in
// argocd-agent's source it comes from (docs/install.md, "The principal's RBAC", lists them).
type principalCall struct {
	source string
	attrs  authorizationv1.ResourceAttributes
}

// principalCalls are the principal's requests on its own namespace and cluster-wide, v0.9.0 and
// the main line that v0.10.0 was cut from.
func principalCalls() []principalCall {
	get := func(resource, name, source string) principalCall {
		return principalCall{source, authorizationv1.ResourceAttributes{Namespace: principalNS, Verb: "get", Resource: resource, Name: name}}
	}
	inNS := func(verb, resource, source string) principalCall {
		return principalCall{source, authorizationv1.ResourceAttributes{Namespace: principalNS, Verb: verb, Resource: resource}}
	}
	clusterWide := func(verb, group, resource, source string) principalCall {
		return principalCall{source, authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource}}
	}
	return []principalCall{
		get("secrets", names.PrincipalTLSSecretName, "--tls-secret-name: cmd/argocd-agent/principal.go, principal/options.go, internal/tlsutil/kubernetes.go"),
		get("secrets", names.CASecretName, "--tls-ca-secret-name and --resource-proxy-ca-secret-name: cmd/argocd-agent/principal.go, internal/tlsutil/kubernetes.go"),
		get("secrets", names.ResourceProxySecretName, "--resource-proxy-secret-name: cmd/argocd-agent/principal.go"),
		get("secrets", names.JWTSecretName, "--jwt-secret-name: principal/options.go, internal/tlsutil"),
		get("secrets", "argocd-redis-proxy-tls", "--redis-proxy-server-tls-secret-name (main line, with redis TLS): cmd/argocd-agent/principal.go"),
		get("secrets", "argocd-redis-tls", "--redis-ca-secret-name (main line, with redis TLS): cmd/argocd-agent/principal.go"),
		inNS("list", "secrets", "cluster-secret informer: internal/argocd/cluster/manager.go; repository informer: principal/server.go"),
		inNS("watch", "secrets", "cluster-secret informer: internal/argocd/cluster/manager.go; repository informer: principal/server.go"),
		inNS("list", "configmaps", "GPG key informer: principal/server.go; TLS blocklist informer (main line): principal/server.go"),
		inNS("watch", "configmaps", "GPG key informer: principal/server.go; TLS blocklist informer (main line): principal/server.go"),
		get("configmaps", principalIdentity, "principal identity (main line): pkg/principal/identity.go"),
		clusterWide("list", "argoproj.io", "applications", "Application informer: principal/server.go"),
		clusterWide("watch", "argoproj.io", "applications", "Application informer: principal/server.go"),
		clusterWide("update", "argoproj.io", "applications", "Application backend: internal/backend/kubernetes/application"),
		clusterWide("list", "argoproj.io", "appprojects", "AppProject informer: principal/server.go"),
		clusterWide("list", "", "namespaces", "namespace informer: principal/server.go"),
		clusterWide("watch", "", "namespaces", "namespace informer: principal/server.go"),
	}
}

// managerWritten are the objects of the principal namespace that the manager writes and the
// revocation engine trusts: the principal may read them, never write them.
func managerWritten() (secrets, configMaps []string) {
	secrets = []string{names.CASecretName, names.JWTSecretName, names.PrincipalTLSSecretName, names.ResourceProxySecretName,
		"cluster-cluster1", certmanager.CAIssuedSecretName, certmanager.PrincipalIssuedSecretName}
	configMaps = []string{ledger.LedgerPrefix + "cluster1", ledger.BlocklistName}
	for _, shard := range "0123456789abcdef" {
		configMaps = append(configMaps, ledger.RevokedPrefix+string(shard))
	}
	return secrets, configMaps
}

// TestPrincipalRBACOnARealAPIServer installs the chart with its principal into a real API server
// and asks the API server, as the principal's ServiceAccount, for every request the principal
// makes (all allowed) and for every write to what the revocation engine trusts (all denied):
// ledgers, the revocation record, the blocklist, the CA, the JWT key, the serving certificates
// and the cluster secrets. A principal that could write them could unblock a revoked agent,
// plant fingerprints that fill the blocklist, or, by annotating the CA or the JWT key, cut every
// agent off.
func TestPrincipalRBACOnARealAPIServer(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true})
	ctx := context.Background()
	admin := env.Client
	for _, ns := range []string{releaseNS, principalNS, "cluster1"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// An identity a principal made itself, as it does when it may create ConfigMaps: the chart
	// leaves it be, and the principal keeps it.
	earlier := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: principalNS, Name: principalIdentity}, Data: map[string]string{"principal-uid": "made-by-the-principal"}}
	if err := admin.Create(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(helmConfig(t, kubeconfig))
	install.ReleaseName, install.Namespace, install.Timeout = releaseName, releaseNS, time.Minute
	if _, err := install.Run(loadChart(t), map[string]any{"principal": map[string]any{"install": true, "namespace": principalNS}}); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	got := &corev1.ConfigMap{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: principalIdentity}, got); err != nil {
		t.Fatal(err)
	}
	if got.Data["principal-uid"] != "made-by-the-principal" {
		t.Errorf("the principal's own identity was replaced: %v", got.Data)
	}

	principal := testenv.ServiceAccount(principalNS, principalSA)
	review := func(attrs authorizationv1.ResourceAttributes) (bool, string) {
		t.Helper()
		allowed, reason, err := principal.Allowed(ctx, admin, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return allowed, reason
	}
	first := principalCalls()[0]
	if err := principal.AwaitAllowed(ctx, admin, testenv.RBACCatchUp, first.attrs); err != nil {
		t.Fatalf("the principal's RBAC in effect (%s): %v", first.source, err)
	}

	for _, c := range principalCalls() {
		if ok, reason := review(c.attrs); !ok {
			t.Errorf("the principal may not %s %s %q in %q, which it needs for %s (%s)", c.attrs.Verb, c.attrs.Resource, c.attrs.Name, c.attrs.Namespace, c.source, reason)
		}
	}

	secrets, configMaps := managerWritten()
	denied := func(resource, name string, verbs ...string) {
		t.Helper()
		for _, verb := range verbs {
			if ok, reason := review(authorizationv1.ResourceAttributes{Namespace: principalNS, Verb: verb, Resource: resource, Name: name}); ok {
				t.Errorf("the principal may %s %s %q: %s", verb, resource, name, reason)
			}
		}
	}
	for _, name := range secrets {
		denied("secrets", name, "create", "update", "patch", "delete")
	}
	for _, name := range configMaps {
		denied("configmaps", name, "create", "update", "patch", "delete")
	}
	// A create names no object when it is authorized, and a collection delete names none either.
	denied("secrets", "", "create", "deletecollection")
	denied("configmaps", "", "create", "deletecollection")
	// The identity is the principal's to read only: rewriting it would pass the principal off
	// as another one to its agents.
	denied("configmaps", principalIdentity, "update", "patch", "delete")
	// Nothing beyond its namespace: the manager's own and a cluster's namespace stay closed.
	for _, ns := range []string{releaseNS, "cluster1"} {
		for _, verb := range []string{"get", "list"} {
			if ok, _ := review(authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "secrets"}); ok {
				t.Errorf("the principal may %s Secrets in %s", verb, ns)
			}
		}
	}

	// The same as real requests of the principal's ServiceAccount: what it reads at start is
	// served, a write to what the revocation engine trusts is refused.
	for _, name := range []string{names.PrincipalTLSSecretName, names.CASecretName, names.ResourceProxySecretName, names.JWTSecretName} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: principalNS, Name: name}, StringData: map[string]string{"k": "v"}}
		if err := admin.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: principalNS, Name: ledger.LedgerPrefix + "cluster1"}, Data: map[string]string{"AB": "2030-01-01T00:00:00Z"}}
	if err := admin.Create(ctx, record); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(principal.Impersonating(env.Config))
	for _, name := range []string{names.PrincipalTLSSecretName, names.CASecretName, names.ResourceProxySecretName, names.JWTSecretName} {
		if _, err := cs.CoreV1().Secrets(principalNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("the principal cannot read Secret %s: %v", name, err)
		}
	}
	if _, err := cs.CoreV1().Secrets(principalNS).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the principal cannot list its namespace's Secrets: %v", err)
	}
	w, err := cs.CoreV1().ConfigMaps(principalNS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ledger.BlocklistName})
	if err != nil {
		t.Errorf("the principal cannot watch its blocklist: %v", err)
	} else {
		w.Stop()
	}
	if _, err := cs.CoreV1().ConfigMaps(principalNS).Get(ctx, principalIdentity, metav1.GetOptions{}); err != nil {
		t.Errorf("the principal cannot read its identity: %v", err)
	}
	record.Data["AB"] = "2020-01-01T00:00:00Z"
	if _, err := cs.CoreV1().ConfigMaps(principalNS).Update(ctx, record, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the principal rewriting a ledger: want Forbidden, got %v", err)
	}
	planted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: principalNS, Name: ledger.RevokedPrefix + "0"}}
	if _, err := cs.CoreV1().ConfigMaps(principalNS).Create(ctx, planted, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the principal creating a revocation-record shard: want Forbidden, got %v", err)
	}
	rotate := fmt.Sprintf(`{"metadata":{"annotations":{%q:"forged"}}}`, v1alpha1.AnnotationRotateCANow)
	if _, err := cs.CoreV1().Secrets(principalNS).Patch(ctx, names.CASecretName, types.MergePatchType, []byte(rotate), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the principal asking for an emergency CA rotation: want Forbidden, got %v", err)
	}
}

// TestRenderPrincipalIdentity: the chart gives the principal its identity ConfigMap, so the
// principal needs no create, with a value that a re-render keeps and another principal
// namespace does not share.
func TestRenderPrincipalIdentity(t *testing.T) {
	uid := func(ns string) string {
		t.Helper()
		objs, err := render(t, map[string]any{"principal": map[string]any{"install": true, "namespace": ns}})
		if err != nil {
			t.Fatal(err)
		}
		var cm *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "ConfigMap" && o.GetName() == principalIdentity {
				cm = o
			}
		}
		if cm == nil || cm.GetNamespace() != ns {
			t.Fatalf("no identity ConfigMap in the principal namespace %s: %v", ns, cm)
		}
		v, _, _ := unstructured.NestedString(cm.Object, "data", "principal-uid")
		if len(v) != 36 || strings.Count(v, "-") != 4 {
			t.Fatalf("principal-uid = %q, want a UUID-shaped value", v)
		}
		return v
	}
	a := uid(principalNS)
	if b := uid(principalNS); a != b {
		t.Errorf("the identity changes from one render to the next: %s, %s", a, b)
	}
	if c := uid("gitops"); a == c {
		t.Errorf("two principal namespaces share the identity %s", a)
	}
	objs, err := render(t, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if find(objs, "ConfigMap", principalIdentity) != nil {
		t.Error("an identity ConfigMap without the principal")
	}
}

// TestRenderPrincipalNamespaceCreate: the principal may create namespaces only when it is told
// to create an autonomous agent's hub namespace (principal.namespaceCreate.enable).
func TestRenderPrincipalNamespaceCreate(t *testing.T) {
	for _, enable := range []bool{false, true} {
		objs, err := render(t, map[string]any{"principal": map[string]any{"install": true, "namespaceCreate": map[string]any{"enable": enable}}})
		if err != nil {
			t.Fatal(err)
		}
		role := clusterRole(t, objs, releaseName+"-principal")
		if n := countRules(role, "", "namespaces", "create"); n != map[bool]int{false: 0, true: 1}[enable] {
			t.Errorf("namespaceCreate.enable=%v: %d rules with create on namespaces", enable, n)
		}
	}
}
