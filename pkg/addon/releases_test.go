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

// call is one Kubernetes API call of argocd-agent's agent (addon.AgentCallRows).
type call = addon.AgentCall

// releaseCalls are the calls of a supported release's agent in mode, with destination-based
// mapping or not.
func releaseCalls(release, mode string, destination bool) []call {
	return addon.AgentCalls(release, mode, destination)
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
		if has(r.Verbs, c.Verb) && has(r.APIGroups, c.Group) && has(r.Resources, c.Resource) && (len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, c.Name)) {
			return true
		}
	}
	return false
}

func (r rendered) allows(c call) bool {
	return allows(r.cluster.Rules, c) || (c.Namespace == addon.AgentNamespace && allows(r.role.Rules, c))
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

func (c rbacCase) calls() []call { return releaseCalls(c.release, c.mode, c.destination) }

// TestAgentTemplateCoversEachReleasesCalls: the rendered Role and ClusterRole allow every call
// of each supported release's agent, per mode and mapping, and none it does not need.
func TestAgentTemplateCoversEachReleasesCalls(t *testing.T) {
	for _, c := range rbacCases() {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.mode, c.destination, "argocd")
			for _, call := range c.calls() {
				if !r.allows(call) {
					t.Errorf("%s (%s): %s %s/%s %q in %q is not allowed", call.Path, call.Source, call.Verb, call.Group, call.Resource, call.Name, call.Namespace)
				}
			}
			for _, call := range addon.AgentMustNot(c.mode, c.destination) {
				if r.allows(call) {
					t.Errorf("%s: %s %s/%s in %q is allowed", call.Path, call.Verb, call.Group, call.Resource, call.Namespace)
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
			agent := testenv.ServiceAccount(ns, addon.AgentName)
			attrs := func(cl call) authorizationv1.ResourceAttributes {
				at := cl.Namespace
				if at == addon.AgentNamespace {
					at = ns
				}
				resource, sub, _ := strings.Cut(cl.Resource, "/")
				return authorizationv1.ResourceAttributes{Verb: cl.Verb, Group: cl.Group, Resource: resource, Subresource: sub, Namespace: at, Name: cl.Name}
			}
			for _, cl := range c.calls() {
				// RBAC objects reach the authorizer through an informer.
				if err := agent.AwaitAllowed(ctx, env.Client, 15*time.Second, attrs(cl)); err != nil {
					t.Errorf("%s (%s): %v", cl.Path, cl.Source, err)
				}
			}
			for _, cl := range addon.AgentMustNot(c.mode, c.destination) {
				if ok, _, err := agent.Allowed(ctx, env.Client, attrs(cl)); err != nil || ok {
					t.Errorf("%s: %s %s/%s in %q allowed=%v (%v)", cl.Path, cl.Verb, cl.Group, cl.Resource, cl.Namespace, ok, err)
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
