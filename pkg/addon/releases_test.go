package addon_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// call is one Kubernetes API call argocd-agent's agent makes on its cluster, and where in
// argocd-agent's source it is made (docs/compatibility.md lists the same per release).
type call struct {
	what, verb, group, resource string
	namespace                   string // "" cluster-wide; agentNS the agent's own
	name                        string
}

const agentNS = "<agent namespace>"

// releaseCalls are the calls of each supported release, per mode: v0.9.0's read from its
// agent/, internal/resync and resource proxy; v0.10.0 makes the same and, from its informer list
// (docs/configuration/reference/agent.md, --informer-sync-timeout) and the adoption of
// Applications (#987, #1007, agent/inbound.go), the ones marked below. The spoke cluster's name
// is "cluster1".
func releaseCalls(release, mode string) []call {
	managed := []call{
		{"application informer", "list", "argoproj.io", "applications", agentNS, ""},
		{"application informer", "watch", "argoproj.io", "applications", agentNS, ""},
		{"createApplication (inbound)", "create", "argoproj.io", "applications", agentNS, ""},
		{"updateApplication (inbound)", "update", "argoproj.io", "applications", agentNS, "guestbook"},
		{"updateApplication (inbound)", "patch", "argoproj.io", "applications", agentNS, "guestbook"},
		{"deleteApplication (inbound)", "delete", "argoproj.io", "applications", agentNS, "guestbook"},
		{"resync on reconnect, in the namespace named after the agent", "get", "argoproj.io", "applications", "cluster1", "guestbook"},
		{"appproject informer", "watch", "argoproj.io", "appprojects", agentNS, ""},
		{"processIncomingAppProject", "create", "argoproj.io", "appprojects", agentNS, ""},
		{"processIncomingAppProject", "delete", "argoproj.io", "appprojects", agentNS, "default"},
		{"repository informer", "list", "", "secrets", agentNS, ""},
		{"repository informer", "watch", "", "secrets", agentNS, ""},
		{"root CA secret", "get", "", "secrets", agentNS, "argocd-agent-ca"},
		{"processIncomingRepository", "create", "", "secrets", agentNS, ""},
		{"processIncomingRepository", "update", "", "secrets", agentNS, "repo-1"},
		{"processIncomingGPGKey", "create", "", "configmaps", agentNS, ""},
		{"event recorder", "create", "", "events", agentNS, ""},
		{"namespace informer", "list", "", "namespaces", "", ""},
		{"namespace informer", "watch", "", "namespaces", "", ""},
		{"resource proxy: live object of an Application", "get", "apps", "deployments", "guestbook", "guestbook-ui"},
		{"resource proxy: events", "list", "", "events", "guestbook", ""},
	}
	autonomous := []call{
		{"application informer", "list", "argoproj.io", "applications", agentNS, ""},
		{"application informer", "watch", "argoproj.io", "applications", agentNS, ""},
		{"UpdateOperation (inbound)", "update", "argoproj.io", "applications", agentNS, "guestbook"},
		{"UpdateOperation (inbound)", "patch", "argoproj.io", "applications", agentNS, "guestbook"},
		{"hub-requested delete (inbound)", "delete", "argoproj.io", "applications", agentNS, "guestbook"},
		{"appproject informer", "watch", "argoproj.io", "appprojects", agentNS, ""},
		{"repository informer", "list", "", "secrets", agentNS, ""},
		{"root CA secret", "get", "", "secrets", agentNS, "argocd-agent-ca"},
		{"event recorder", "create", "", "events", agentNS, ""},
		{"namespace informer", "list", "", "namespaces", "", ""},
		{"namespace informer", "watch", "", "namespaces", "", ""},
		{"resource proxy: live object of an Application", "get", "apps", "deployments", "guestbook", "guestbook-ui"},
		{"resource proxy: events", "list", "", "events", "guestbook", ""},
	}
	calls := managed
	if mode == addon.ModeAutonomous {
		calls = autonomous
	}
	calls = slices.Clone(calls)
	if release == "v0.10.0" {
		calls = append(calls,
			call{"GPG-key informer", "list", "", "configmaps", agentNS, ""},
			call{"GPG-key informer", "watch", "", "configmaps", agentNS, ""},
			call{"appproject informer", "list", "argoproj.io", "appprojects", agentNS, ""},
		)
		if mode == addon.ModeManaged {
			// Adoption stamps the principal's source UID on an existing Application; with the
			// policy the addon sets (never) it is not made, but an Application's own annotation
			// may still ask for it.
			calls = append(calls, call{"adoption of an existing Application (agent/inbound.go)", "update", "argoproj.io", "applications", agentNS, "guestbook"})
		}
	}
	return calls
}

// destinationMappingCalls are what the agent calls beyond managed mode's with
// --destination-based-mapping (agent/agent.go, agent/inbound.go), in both releases.
var destinationMappingCalls = []call{
	{"application informer over every namespace", "list", "argoproj.io", "applications", "", ""},
	{"application informer over every namespace", "watch", "argoproj.io", "applications", "", ""},
	{"populateSourceCache lists every namespace", "list", "argoproj.io", "applications", "", ""},
	{"resync of an Application from another hub namespace", "get", "argoproj.io", "applications", "team-a", "guestbook"},
}

// mustNot are calls the agent does not need in either release; the template must not grant them.
func mustNot(mode string, destination bool) []call {
	switch {
	case destination:
		return []call{
			{"namespace creation (--create-namespace, not set)", "create", "", "namespaces", "", ""},
			{"applications in other namespaces (--allowed-namespaces, not set)", "create", "argoproj.io", "applications", "team-a", ""},
			{"applications in other namespaces (--allowed-namespaces, not set)", "delete", "argoproj.io", "applications", "team-a", "guestbook"},
		}
	case mode == addon.ModeManaged:
		return []call{
			{"namespace creation", "create", "", "namespaces", "", ""},
			{"applications of every namespace (destination-based mapping only)", "list", "argoproj.io", "applications", "", ""},
			{"secrets of other namespaces", "list", "", "secrets", "kube-system", ""},
			{"applications outside its namespace", "create", "argoproj.io", "applications", "cluster1", ""},
			{"writes through the resource proxy", "delete", "apps", "deployments", "guestbook", "guestbook-ui"},
			{"a shell in a pod (web terminal, not enabled)", "create", "", "pods/exec", "guestbook", "guestbook-ui"},
		}
	default:
		return []call{
			{"incoming creates are discarded", "create", "argoproj.io", "applications", agentNS, ""},
			{"incoming creates are discarded", "create", "argoproj.io", "appprojects", agentNS, ""},
			{"incoming creates are discarded", "create", "", "secrets", agentNS, ""},
			{"namespace creation", "create", "", "namespaces", "", ""},
			{"secrets of other namespaces", "list", "", "secrets", "kube-system", ""},
		}
	}
}

// releaseFlags are the agent flags of each release that the template may pass
// (cmd/argocd-agent/agent.go; for v0.10.0 also its docs/configuration/reference/agent.md).
var releaseFlags = map[string][]string{
	"v0.9.0": {"agent-mode", "server-address", "server-port", "creds", "namespace", "root-ca-secret-name", "tls-client-cert", "tls-client-key",
		"redis-addr", "log-level", "ignore-unmanaged-apps", "healthz-port", "metrics-port", "destination-based-mapping",
		"source-uid-mismatch-policy", "informer-sync-timeout"},
	"v0.10.0": {"agent-mode", "server-address", "server-port", "creds", "namespace", "root-ca-secret-name", "tls-client-cert", "tls-client-key",
		"redis-addr", "log-level", "ignore-unmanaged-apps", "healthz-port", "metrics-port", "destination-based-mapping",
		"source-uid-mismatch-policy", "informer-sync-timeout", "on-application-recreate", "heartbeat-interval", "adoption-policy"},
}

// rendered is an agent template's RBAC and Deployment, as OCM's template addon renders them
// into the namespace ns.
type rendered struct {
	objects    []*unstructured.Unstructured
	role       rbacv1.Role
	cluster    rbacv1.ClusterRole
	deployment appsv1.Deployment
}

func render(t *testing.T, mode string, destination bool, ns string) rendered {
	t.Helper()
	tpl, err := addon.BuildAddOnTemplate(addon.TemplateInput{
		AddonName: addon.DefaultAddonName, TemplateName: "agent-" + mode, SignerName: addon.DefaultSignerName,
		CABundlePEM: caPEM(t), Mode: mode, DestinationBasedMapping: destination,
	})
	if err != nil {
		t.Fatal(err)
	}
	var r rendered
	for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
		raw := strings.ReplaceAll(string(m.Raw), "{{"+addon.VarInstallNamespace+"}}", ns)
		raw = strings.ReplaceAll(raw, `"namespace":"`+addon.DefaultAgentInstallNamespace+`"`, `"namespace":"`+ns+`"`)
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(raw), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Namespace" {
			// OCM's template addon makes the install namespace the ADC's.
			u.SetName(ns)
		}
		var into any
		switch u.GetKind() {
		case "Role":
			into = &r.role
		case "ClusterRole":
			into = &r.cluster
		case "Deployment":
			into = &r.deployment
		}
		if into != nil {
			if err := json.Unmarshal([]byte(raw), into); err != nil {
				t.Fatal(err)
			}
		}
		r.objects = append(r.objects, u)
	}
	return r
}

// allows evaluates RBAC rules as the API server's authorizer does for the attributes used here.
func allows(rules []rbacv1.PolicyRule, c call) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if has(r.Verbs, c.verb) && has(r.APIGroups, c.group) && has(r.Resources, c.resource) && (len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, c.name)) {
			return true
		}
	}
	return false
}

func (r rendered) allows(c call) bool {
	return allows(r.cluster.Rules, c) || (c.namespace == agentNS && allows(r.role.Rules, c))
}

type rbacCase struct {
	name, release, mode string
	destination         bool
}

func rbacCases() []rbacCase {
	var out []rbacCase
	for _, p := range version.Pairs() {
		out = append(out,
			rbacCase{p.Agent + "-managed", p.Agent, addon.ModeManaged, false},
			rbacCase{p.Agent + "-autonomous", p.Agent, addon.ModeAutonomous, false},
			rbacCase{p.Agent + "-destination", p.Agent, addon.ModeManaged, true})
	}
	return out
}

func (c rbacCase) calls() []call {
	calls := releaseCalls(c.release, c.mode)
	if c.destination {
		calls = append(calls, destinationMappingCalls...)
	}
	return calls
}

// TestAgentTemplateCoversEachReleasesCalls: the rendered Role and ClusterRole allow every call
// of each supported release's agent, per mode and mapping, and none it does not need.
func TestAgentTemplateCoversEachReleasesCalls(t *testing.T) {
	for _, c := range rbacCases() {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.mode, c.destination, "argocd")
			for _, call := range c.calls() {
				if !r.allows(call) {
					t.Errorf("%s: %s %s/%s %q in %q is not allowed", call.what, call.verb, call.group, call.resource, call.name, call.namespace)
				}
			}
			for _, call := range mustNot(c.mode, c.destination) {
				if r.allows(call) {
					t.Errorf("%s: %s %s/%s in %q is allowed", call.what, call.verb, call.group, call.resource, call.namespace)
				}
			}
		})
	}
}

type agentContainer struct {
	args []string
	env  map[string]string
}

// TestAgentDeploymentRunsOnEachRelease: the agent container passes only flags that every
// supported release has (one template serves both, and a cluster not yet released by a version
// change renders it with the old image), and runs v0.10.0 with adoption off through the
// environment, which v0.9.0 ignores.
func TestAgentDeploymentRunsOnEachRelease(t *testing.T) {
	for _, mode := range []string{addon.ModeManaged, addon.ModeAutonomous} {
		for _, destination := range []bool{false, true} {
			if destination && mode == addon.ModeAutonomous {
				continue
			}
			d := render(t, mode, destination, "argocd").deployment
			var agent *agentContainer
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name == addon.AgentContainerName {
					agent = &agentContainer{args: c.Args, env: map[string]string{}}
					for _, e := range c.Env {
						agent.env[e.Name] = e.Value
					}
				}
			}
			if agent == nil || len(agent.args) == 0 || agent.args[0] != "agent" {
				t.Fatalf("%s: no agent container running the agent subcommand", mode)
			}
			for _, arg := range agent.args[1:] {
				name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
				for _, p := range version.Pairs() {
					if !slices.Contains(releaseFlags[p.Agent], name) {
						t.Errorf("%s: flag --%s is not a flag of argocd-agent %s", mode, name, p.Agent)
					}
				}
			}
			if got := agent.env[addon.AdoptionPolicyEnv]; got != "never" {
				t.Errorf("%s: %s = %q, want never", mode, addon.AdoptionPolicyEnv, got)
			}
			if slices.ContainsFunc(agent.args, func(a string) bool { return strings.HasPrefix(a, "--adoption-policy") }) {
				t.Errorf("%s: --adoption-policy is passed as a flag, which v0.9.0 refuses", mode)
			}
			if d.Spec.Template.Spec.ServiceAccountName != addon.AgentName {
				t.Errorf("%s: the agent runs as %q, not the ServiceAccount the RBAC binds", mode, d.Spec.Template.Spec.ServiceAccountName)
			}
		}
	}
}

// TestAgentRBACOnARealAPIServer applies the template's RBAC to a real API server, one namespace
// per release, mode and mapping, and asks it (SubjectAccessReview) whether the agent's
// ServiceAccount may make each call of that release, and none it does not need.
func TestAgentRBACOnARealAPIServer(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	for _, c := range rbacCases() {
		t.Run(c.name, func(t *testing.T) {
			ns := "agent-" + strings.ReplaceAll(c.name, ".", "-")
			r := render(t, c.mode, c.destination, ns)
			for _, o := range r.objects {
				switch o.GetKind() {
				case "Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
					if err := env.Client.Create(ctx, o); err != nil {
						t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
					}
				}
			}
			user := "system:serviceaccount:" + ns + ":" + addon.AgentName
			check := func(cl call) (bool, error) {
				at := cl.namespace
				if at == agentNS {
					at = ns
				}
				resource, sub, _ := strings.Cut(cl.resource, "/")
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: cl.verb, Group: cl.group, Resource: resource, Subresource: sub, Namespace: at, Name: cl.name},
				}}
				if err := env.Client.Create(ctx, sar); err != nil {
					return false, err
				}
				return sar.Status.Allowed, nil
			}
			for _, cl := range c.calls() {
				// RBAC objects reach the authorizer through an informer.
				deadline := time.Now().Add(15 * time.Second)
				for {
					ok, err := check(cl)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s: %s %s/%s %q in %q is denied", cl.what, cl.verb, cl.group, cl.resource, cl.name, cl.namespace)
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			for _, cl := range mustNot(c.mode, c.destination) {
				if ok, err := check(cl); err != nil || ok {
					t.Errorf("%s: %s %s/%s in %q allowed=%v (%v)", cl.what, cl.verb, cl.group, cl.resource, cl.namespace, ok, err)
				}
			}
		})
	}
}

func caPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "argocd-agent-ca"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
