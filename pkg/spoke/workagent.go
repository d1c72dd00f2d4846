package spoke

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// PullModelWorkAgentRoleName names the ClusterRole that lets OCM's work agent apply the basic
// pull model's Applications.
const PullModelWorkAgentRoleName = "open-cluster-management:argocd-pull-model:work"

// PullModelWorkAgentRole is the ClusterRole OCM's work agent needs to apply the basic pull
// model's ManifestWorks: a stock klusterlet's work agent holds the admin role and OCM's own
// execution rights, and none of them covers Argo CD's kinds (Argo CD ships no roles aggregated
// to admin). The label aggregates it into the work agent's role
// (open-cluster-management:<klusterlet>-work:aggregate), whatever the klusterlet's name or
// mode. It grants Applications, and AppProjects without delete (the pull model delivers an
// Application's project with it and never deletes one); the components addon's default
// AppProject needs no more either.
func PullModelWorkAgentRole() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRole",
		"metadata": map[string]any{
			"name":   PullModelWorkAgentRoleName,
			"labels": map[string]any{"open-cluster-management.io/aggregate-to-work": "true"},
		},
		"rules": []any{
			map[string]any{
				"apiGroups": []any{"argoproj.io"},
				"resources": []any{"applications"},
				"verbs":     []any{"get", "list", "watch", "create", "update", "patch", "delete"},
			},
			map[string]any{
				"apiGroups": []any{"argoproj.io"},
				"resources": []any{"appprojects"},
				"verbs":     []any{"get", "list", "watch", "create", "update", "patch"},
			},
		},
	}}
}

// DefaultAppProjectName is the project an Application names unless it names another.
const DefaultAppProjectName = "default"

// defaultAppProject is the AppProject argocd-server creates at start-up (same spec) when it does
// not exist. The addon installs no argocd-server, so without it every Application naming no
// project would fail on the cluster. It is created once and never updated (it holds the user's
// policy, which the user may tighten; in managed mode the principal may deliver its own), and
// kept when the addon is removed, like the CRDs, since the Applications it governs stay.
func defaultAppProject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "AppProject",
		"metadata": map[string]any{
			"name":        DefaultAppProjectName,
			"annotations": map[string]any{addonv1alpha1.DeletionOrphanAnnotationKey: ""},
		},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
}

// GPGKeysConfigMap is Argo CD's ConfigMap of GnuPG public keys. argocd-agent writes it in
// managed mode (the principal sends the keys), so the work agent only creates it.
const GPGKeysConfigMap = "argocd-gpg-keys-cm"

// createOnly lists the manifests the work agent creates when missing and never updates, in
// whatever namespace OCM installs the components: the default AppProject, and the GnuPG keys
// ConfigMap, which the repo-server mounts and the agent fills (an update would put back the
// install's empty data over the agent's).
func createOnly() []workv1.ManifestConfigOption {
	option := func(group, resource, name string) workv1.ManifestConfigOption {
		return workv1.ManifestConfigOption{
			ResourceIdentifier: workv1.ResourceIdentifier{Group: group, Resource: resource, Name: name, Namespace: "*"},
			UpdateStrategy:     &workv1.UpdateStrategy{Type: workv1.UpdateStrategyTypeCreateOnly},
			// The API server's default, set so that the stored template equals the built one.
			FeedbackScrapeType: workv1.FeedbackPollType,
		}
	}
	return []workv1.ManifestConfigOption{
		option("argoproj.io", "appprojects", DefaultAppProjectName),
		option("", "configmaps", GPGKeysConfigMap),
	}
}
