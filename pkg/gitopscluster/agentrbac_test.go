package gitopscluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// agentCalls are the calls argocd-agent's agent makes in mode, with destination-based mapping
// or not, in every release the calls were read for: one template serves them all.
func agentCalls(mode v1alpha1.AgentMode, destination bool) []addon.AgentCall {
	var out []addon.AgentCall
	for _, release := range addon.AgentCallReleases {
		out = append(out, addon.AgentCalls(release, string(mode), destination)...)
	}
	return out
}

// TestAgentRBACCoversWhatArgoCDAgentCalls applies the RBAC of the AddOnTemplate the manager
// wrote, for each mode and application mapping, to the API server and asks it
// (SubjectAccessReview) whether the agent's service account may make each call argocd-agent's
// agent makes, and none it does not need.
func TestAgentRBACCoversWhatArgoCDAgentCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		mode    v1alpha1.AgentMode
		mapping v1alpha1.ApplicationMapping
		calls   []addon.AgentCall
		mustNot []addon.AgentCall
	}{
		{"managed", v1alpha1.AgentModeManaged, "", agentCalls(v1alpha1.AgentModeManaged, false), addon.AgentMustNot(addon.ModeManaged, false)},
		{"autonomous", v1alpha1.AgentModeAutonomous, "", agentCalls(v1alpha1.AgentModeAutonomous, false), addon.AgentMustNot(addon.ModeAutonomous, false)},
		{"managed-destination", v1alpha1.AgentModeManaged, v1alpha1.ApplicationMappingDestination,
			agentCalls(v1alpha1.AgentModeManaged, true), addon.AgentMustNot(addon.ModeManaged, true)},
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

			agent := testenv.ServiceAccount(spokeNS, addon.AgentName)
			check := func(c addon.AgentCall, want bool) error {
				ns := c.Namespace
				if ns == addon.AgentNamespace {
					ns = spokeNS
				}
				resource, sub, _ := strings.Cut(c.Resource, "/")
				allowed, _, err := agent.Allowed(ctx, k8s, authorizationv1.ResourceAttributes{
					Verb: c.Verb, Group: c.Group, Resource: resource, Subresource: sub, Namespace: ns, Name: c.Name,
				})
				if err != nil {
					return err
				}
				if allowed != want {
					return fmt.Errorf("%s (%s): %s %s/%s in %q allowed=%v, want %v", c.Path, c.Source, c.Verb, c.Group, c.Resource, ns, allowed, want)
				}
				return nil
			}
			for _, c := range tc.calls {
				// RBAC objects take a moment to reach the authorizer's cache.
				eventually(t, c.Path, func() error { return check(c, true) })
			}
			for _, c := range tc.mustNot {
				if err := check(c, false); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
