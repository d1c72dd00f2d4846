package gitopscluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
)

// agentCall is one Kubernetes API call argocd-agent v0.9.0's agent makes on its cluster.
type agentCall struct {
	what      string // the agent code path that makes the call
	verb      string
	group     string
	resource  string
	namespace string // "" = cluster-wide; agentNS = the agent's own namespace
	name      string
}

const agentNS = "<agent namespace>"

// agentCalls lists, per mode, what the agent calls (read from argocd-agent v0.9.0's agent/,
// internal/resync and its resource proxy). The spoke cluster's name is "cluster1".
var agentCalls = map[v1alpha1.AgentMode][]agentCall{
	v1alpha1.AgentModeManaged: {
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
	},
	v1alpha1.AgentModeAutonomous: {
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
	},
}

// destinationMappingCalls are what the agent calls beyond managed mode's with
// --destination-based-mapping (agent/agent.go, agent/inbound.go of v0.9.0).
var destinationMappingCalls = []agentCall{
	{"application informer over every namespace", "list", "argoproj.io", "applications", "", ""},
	{"application informer over every namespace", "watch", "argoproj.io", "applications", "", ""},
	{"populateSourceCache lists every namespace", "list", "argoproj.io", "applications", "", ""},
	{"resync of an Application from another hub namespace", "get", "argoproj.io", "applications", "team-a", "guestbook"},
}

// destinationMappingMustNot: with destination-based mapping the agent still writes only in its
// own namespace (Applications of the principal's namespace are stored there; other namespaces
// need --allowed-namespaces, and namespace creation --create-namespace, neither set).
var destinationMappingMustNot = []agentCall{
	{"namespace creation (--create-namespace)", "create", "", "namespaces", "", ""},
	{"applications in other namespaces (--allowed-namespaces)", "create", "argoproj.io", "applications", "team-a", ""},
	{"applications in other namespaces (--allowed-namespaces)", "update", "argoproj.io", "applications", "team-a", "guestbook"},
	{"applications in other namespaces (--allowed-namespaces)", "delete", "argoproj.io", "applications", "team-a", "guestbook"},
}

// agentMustNot lists calls the agent never needs; the template must not grant them.
var agentMustNot = map[v1alpha1.AgentMode][]agentCall{
	v1alpha1.AgentModeManaged: {
		{"namespace creation (destination-based mapping only)", "create", "", "namespaces", "", ""},
		{"applications of every namespace (destination-based mapping only)", "list", "argoproj.io", "applications", "", ""},
		{"applications of every namespace (destination-based mapping only)", "watch", "argoproj.io", "applications", "", ""},
		{"secrets of other namespaces", "list", "", "secrets", "kube-system", ""},
		{"applications outside its namespace", "create", "argoproj.io", "applications", "cluster1", ""},
		{"writes through the resource proxy", "delete", "apps", "deployments", "guestbook", "guestbook-ui"},
	},
	v1alpha1.AgentModeAutonomous: {
		{"incoming creates are discarded", "create", "argoproj.io", "applications", agentNS, ""},
		{"incoming creates are discarded", "create", "argoproj.io", "appprojects", agentNS, ""},
		{"incoming creates are discarded", "create", "", "secrets", agentNS, ""},
		{"namespace creation", "create", "", "namespaces", "", ""},
		{"secrets of other namespaces", "list", "", "secrets", "kube-system", ""},
	},
}

// TestAgentRBACCoversWhatArgoCDAgentCalls applies the RBAC of the AddOnTemplate the manager
// wrote, for each mode and application mapping, to the API server and asks it
// (SubjectAccessReview) whether the agent's service account may make each call argocd-agent's
// agent makes, and none it does not need.
func TestAgentRBACCoversWhatArgoCDAgentCalls(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		mode    v1alpha1.AgentMode
		mapping v1alpha1.ApplicationMapping
		calls   []agentCall
		mustNot []agentCall
	}{
		{"managed", v1alpha1.AgentModeManaged, "", agentCalls[v1alpha1.AgentModeManaged], agentMustNot[v1alpha1.AgentModeManaged]},
		{"autonomous", v1alpha1.AgentModeAutonomous, "", agentCalls[v1alpha1.AgentModeAutonomous], agentMustNot[v1alpha1.AgentModeAutonomous]},
		{"managed-destination", v1alpha1.AgentModeManaged, v1alpha1.ApplicationMappingDestination,
			append(slices.Clone(agentCalls[v1alpha1.AgentModeManaged]), destinationMappingCalls...), destinationMappingMustNot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := "agent-rbac-" + tc.name
			createNamespace(t, ns)
			createManagedClusters(t, "cluster1")
			createPlacement(t, ns, "p")
			setDecisions(t, ns, "p", 0, "cluster1")
			createGitOpsCluster(t, ns, "g", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
				g.Spec.ArgoCDAgentAddon.Mode = tc.mode
				g.Spec.ArgoCDAgentAddon.ApplicationMapping = tc.mapping
			})
			var tpl addonv1alpha1.AddOnTemplate
			eventually(t, "the AddOnTemplate", func() error {
				g := getGOC(t, ns, "g")
				if g.Status.AddOnTemplate == "" {
					return fmt.Errorf("no template in status yet")
				}
				return k8s.Get(ctx, types.NamespacedName{Name: g.Status.AddOnTemplate}, &tpl)
			})

			// Apply the template's RBAC like OCM's work agent would, in a namespace of this
			// mode (OCM moves namespaced objects and binding subjects to the install namespace).
			spokeNS := "spoke-" + tc.name
			createNamespace(t, spokeNS)
			suffix := "-" + tc.name
			applied := 0
			for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
				u := &unstructured.Unstructured{}
				if err := json.Unmarshal(m.Raw, &u.Object); err != nil {
					t.Fatal(err)
				}
				switch u.GetKind() {
				case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
				default:
					continue
				}
				raw, _ := json.Marshal(u.Object)
				rendered := strings.ReplaceAll(string(raw), `"namespace":"`+addon.DefaultAgentInstallNamespace+`"`, `"namespace":"`+spokeNS+`"`)
				rendered = strings.ReplaceAll(rendered, "{{INSTALL_NAMESPACE}}", spokeNS)
				if err := json.Unmarshal([]byte(rendered), &u.Object); err != nil {
					t.Fatal(err)
				}
				if u.GetNamespace() == "" {
					u.SetName(u.GetName() + suffix)
				}
				if u.GetKind() == "ClusterRoleBinding" {
					if err := unstructured.SetNestedField(u.Object, u.Object["roleRef"].(map[string]any)["name"].(string)+suffix, "roleRef", "name"); err != nil {
						t.Fatal(err)
					}
				}
				if err := k8s.Create(ctx, u); err != nil {
					t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
				}
				applied++
			}
			if applied != 5 {
				t.Fatalf("the template carries %d RBAC objects, want 5 (service account, role, binding, cluster role, binding)", applied)
			}

			user := "system:serviceaccount:" + spokeNS + ":" + addon.AgentName
			check := func(c agentCall, want bool) error {
				ns := c.namespace
				if ns == agentNS {
					ns = spokeNS
				}
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   user,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + spokeNS, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: ns, Name: c.name,
					},
				}}
				if err := k8s.Create(ctx, sar); err != nil {
					return err
				}
				if sar.Status.Allowed != want {
					return fmt.Errorf("%s: %s %s/%s in %q allowed=%v, want %v", c.what, c.verb, c.group, c.resource, ns, sar.Status.Allowed, want)
				}
				return nil
			}
			for _, c := range tc.calls {
				// RBAC objects take a moment to reach the authorizer's cache.
				eventually(t, c.what, func() error { return check(c, true) })
			}
			for _, c := range tc.mustNot {
				if err := check(c, false); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
