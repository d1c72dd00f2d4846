package propagation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

func project(spec map[string]any) *unstructured.Unstructured {
	p := NewAppProject()
	p.SetNamespace("argocd")
	p.SetName("default")
	p.Object["spec"] = spec
	return p
}

func exclusiveSet(name string) *clusterv1beta2.ManagedClusterSet {
	return &clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func binding(ns, set string) Binding {
	return Binding{Binding: &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: set}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: set}}, Set: exclusiveSet(set)}
}

// TestAuthorize: each rule of delivery refuses on its own, with its reason, and all of them
// together admit.
func TestAuthorize(t *testing.T) {
	policy := Policy{ArgoCDNamespace: "argocd", SourceNamespaces: []string{"argocd", "team-a"}, SpokeNamespace: "argocd"}
	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Labels: map[string]string{clusterv1beta2.ClusterSetLabel: "blue"}}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
	open := map[string]any{
		"sourceRepos":      []any{"https://git.example/*"},
		"destinations":     []any{map[string]any{"server": pullmodel.InClusterServer, "namespace": "gb*"}},
		"sourceNamespaces": []any{"team-*"},
	}
	base := func() (*unstructured.Unstructured, Facts) {
		app := hubApp() // team-a/guestbook for c1
		_ = unstructured.SetNestedField(app.Object, "https://git.example/guestbook", "spec", "source", "repoURL")
		_ = unstructured.SetNestedField(app.Object, "team-a", "spec", "project")
		p := project(runtime.DeepCopyJSON(open))
		p.SetName("team-a")
		return app, Facts{Cluster: cluster.DeepCopy(), Bindings: []Binding{binding("team-a", "blue")}, Project: p}
	}
	for _, tc := range []struct {
		name   string
		edit   func(*unstructured.Unstructured, *Facts)
		reason string
	}{
		{"every rule holds", func(*unstructured.Unstructured, *Facts) {}, ""},
		{"namespace not allowed", func(a *unstructured.Unstructured, _ *Facts) { a.SetNamespace("team-b") }, ReasonNamespaceNotAllowed},
		{"namespace of a managed cluster", func(_ *unstructured.Unstructured, f *Facts) { f.SourceIsCluster = true }, ReasonAgentNamespace},
		{"argocd-agent's copy", func(a *unstructured.Unstructured, _ *Facts) {
			an := a.GetAnnotations()
			an[AnnotationAgentSourceUID] = "x"
			a.SetAnnotations(an)
		}, ReasonAgentCopy},
		{"cluster missing", func(_ *unstructured.Unstructured, f *Facts) { f.Cluster = nil }, ReasonUnknownCluster},
		{"no binding", func(_ *unstructured.Unstructured, f *Facts) { f.Bindings = nil }, ReasonClusterNotBound},
		{"binding to another set", func(_ *unstructured.Unstructured, f *Facts) { f.Bindings = []Binding{binding("team-a", "red")} }, ReasonClusterNotBound},
		{"bound set does not exist", func(_ *unstructured.Unstructured, f *Facts) { f.Bindings[0].Set = nil }, ReasonClusterNotBound},
		{"set selecting by labels the cluster writes", func(_ *unstructured.Unstructured, f *Facts) {
			f.Bindings[0].Set.Spec.ClusterSelector = clusterv1beta2.ManagedClusterSelector{SelectorType: clusterv1beta2.LabelSelector, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}
			f.Cluster.Labels = map[string]string{"env": "prod"}
		}, ReasonClusterNotBound},
		{"global set", func(_ *unstructured.Unstructured, f *Facts) {
			f.Bindings[0].Set.Spec.ClusterSelector = clusterv1beta2.ManagedClusterSelector{SelectorType: clusterv1beta2.LabelSelector, LabelSelector: &metav1.LabelSelector{}}
			f.Cluster.Labels = nil
		}, ""},
		{"spoke namespace asked", func(a *unstructured.Unstructured, _ *Facts) {
			an := a.GetAnnotations()
			an[pullmodel.AnnotationAppNamespace] = "kube-system"
			a.SetAnnotations(an)
		}, ReasonSpokeNamespaceNotAllowed},
		{"project missing", func(_ *unstructured.Unstructured, f *Facts) { f.Project = nil }, ReasonProjectNotFound},
		{"the hub itself, from a tenant namespace: lands under another name", func(_ *unstructured.Unstructured, f *Facts) {
			f.Cluster.Name = LocalClusterName
		}, ""},
		{"the hub itself (local-cluster), from the Argo CD namespace: would land on itself", func(a *unstructured.Unstructured, f *Facts) {
			a.SetNamespace("argocd")
			f.Bindings = []Binding{binding("argocd", "blue")}
			f.Cluster.Name = LocalClusterName
		}, ReasonHubItself},
		{"the hub itself (labelled), from the Argo CD namespace", func(a *unstructured.Unstructured, f *Facts) {
			a.SetNamespace("argocd")
			f.Bindings = []Binding{binding("argocd", "blue")}
			f.Cluster.Labels[LocalClusterLabel] = "true"
		}, ReasonHubItself},
		{"project without the source namespace", func(_ *unstructured.Unstructured, f *Facts) {
			delete(f.Project.Object["spec"].(map[string]any), "sourceNamespaces")
		}, ReasonProjectForbids},
		{"the Argo CD namespace needs no sourceNamespaces", func(a *unstructured.Unstructured, f *Facts) {
			a.SetNamespace("argocd")
			delete(f.Project.Object["spec"].(map[string]any), "sourceNamespaces")
			f.Bindings = []Binding{binding("argocd", "blue")}
		}, ""},
		{"no spec, a permitted repository in its operation: it has no destination either", func(a *unstructured.Unstructured, f *Facts) {
			a.SetNamespace("argocd")
			f.Bindings = []Binding{binding("argocd", "blue")}
			delete(a.Object, "spec")
			_ = unstructured.SetNestedField(a.Object, "https://git.example/guestbook", "operation", "sync", "source", "repoURL")
			f.Project.Object["spec"].(map[string]any)["destinations"] = []any{map[string]any{"server": "*", "namespace": "*"}}
		}, ReasonProjectForbids},
		{"repository not permitted", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedField(a.Object, "https://evil.example/x", "spec", "source", "repoURL")
		}, ReasonProjectForbids},
		{"one of several sources not permitted", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedSlice(a.Object, []any{map[string]any{"repoURL": "https://git.example/a"}, map[string]any{"repoURL": "https://evil.example/b"}}, "spec", "sources")
		}, ReasonProjectForbids},
		{"repository denied by a ! pattern", func(_ *unstructured.Unstructured, f *Facts) {
			f.Project.Object["spec"].(map[string]any)["sourceRepos"] = []any{"*", "!https://git.example/guestbook"}
		}, ReasonProjectForbids},
		{"a dot-dot path out of the permitted folder", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedField(a.Object, "https://git.example/x/../../evil.example/repo", "spec", "source", "repoURL")
		}, ReasonProjectForbids},
		{"a star does not cross a slash", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedField(a.Object, "https://git.example/team-b/repo", "spec", "source", "repoURL")
		}, ReasonProjectForbids},
		{"an allowing pattern matches the normalized URL", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedField(a.Object, "HTTPS://git.example/Guestbook.git", "spec", "source", "repoURL")
		}, ""},
		{"a denying pattern matches the normalized URL", func(a *unstructured.Unstructured, f *Facts) {
			f.Project.Object["spec"].(map[string]any)["sourceRepos"] = []any{"*", "!https://git.example/GUESTBOOK.git"}
		}, ReasonProjectForbids},
		{"a denying scp-like pattern denies the ssh URL", func(a *unstructured.Unstructured, f *Facts) {
			_ = unstructured.SetNestedField(a.Object, "ssh://git@git.example/org/x", "spec", "source", "repoURL")
			f.Project.Object["spec"].(map[string]any)["sourceRepos"] = []any{"*", "!git@git.example:org/x"}
		}, ReasonProjectForbids},
		{"a source hydrator's repository is checked", func(a *unstructured.Unstructured, _ *Facts) {
			unstructured.RemoveNestedField(a.Object, "spec", "source")
			_ = unstructured.SetNestedField(a.Object, "https://evil.example/x", "spec", "sourceHydrator", "drySource", "repoURL")
		}, ReasonProjectForbids},
		{"a source hydrator's sync repository is checked", func(a *unstructured.Unstructured, _ *Facts) {
			unstructured.RemoveNestedField(a.Object, "spec", "source")
			_ = unstructured.SetNestedField(a.Object, "https://git.example/dry", "spec", "sourceHydrator", "drySource", "repoURL")
			_ = unstructured.SetNestedField(a.Object, "https://evil.example/hydrated", "spec", "sourceHydrator", "syncSource", "repoURL")
		}, ReasonProjectForbids},
		{"an operation's source is checked like the spec's", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedField(a.Object, "https://evil.example/x", "operation", "sync", "source", "repoURL")
		}, ReasonProjectForbids},
		{"an operation's sources are checked like the spec's", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedSlice(a.Object, []any{map[string]any{"repoURL": "https://git.example/a"}, map[string]any{"repoURL": "https://evil.example/b"}}, "operation", "sync", "sources")
		}, ReasonProjectForbids},
		{"an operation as Argo CD's API makes it", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedField(a.Object, map[string]any{"repoURL": "https://git.example/guestbook", "targetRevision": "v2"}, "operation", "sync", "source")
			_ = unstructured.SetNestedField(a.Object, "v2", "operation", "sync", "revision")
		}, ""},
		{"an operation with inline manifests", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedField(a.Object, map[string]any{"repoURL": "https://git.example/guestbook"}, "operation", "sync", "source")
			_ = unstructured.SetNestedStringSlice(a.Object, []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`}, "operation", "sync", "manifests")
		}, ReasonOperationNotAllowed},
		{"encoded dot segments out of the permitted folder", func(a *unstructured.Unstructured, f *Facts) {
			f.Project.Object["spec"].(map[string]any)["sourceRepos"] = []any{"https://git.example/team-a/**"}
			_ = unstructured.SetNestedField(a.Object, "https://git.example/team-a/%2e%2e/team-b/x", "spec", "source", "repoURL")
		}, ReasonProjectForbids},
		{"upper-case encoded dot segments", func(a *unstructured.Unstructured, f *Facts) {
			f.Project.Object["spec"].(map[string]any)["sourceRepos"] = []any{"https://git.example/team-a/**"}
			_ = unstructured.SetNestedField(a.Object, "https://git.example/team-a/.%2E/team-b/x", "spec", "source", "repoURL")
		}, ReasonProjectForbids},
		{"an encoded slash", func(a *unstructured.Unstructured, f *Facts) {
			f.Project.Object["spec"].(map[string]any)["sourceRepos"] = []any{"https://git.example/team-a/*"}
			_ = unstructured.SetNestedField(a.Object, "https://git.example/team-a/x%2F..%2Fteam-b", "spec", "source", "repoURL")
		}, ReasonProjectForbids},
		{"a deeper path in the permitted folder", func(a *unstructured.Unstructured, f *Facts) {
			f.Project.Object["spec"].(map[string]any)["sourceRepos"] = []any{"https://git.example/team-a/**"}
			_ = unstructured.SetNestedField(a.Object, "https://git.example/team-a/apps/web", "spec", "source", "repoURL")
		}, ""},
		{"the default project from a tenant namespace", func(a *unstructured.Unstructured, f *Facts) {
			_ = unstructured.SetNestedField(a.Object, "default", "spec", "project")
			f.Project.SetName("default")
		}, ReasonProjectForbids},
		{"the default project from the Argo CD namespace", func(a *unstructured.Unstructured, f *Facts) {
			a.SetNamespace("argocd")
			_ = unstructured.SetNestedField(a.Object, "default", "spec", "project")
			f.Project.SetName("default")
			f.Bindings = []Binding{binding("argocd", "blue")}
		}, ""},
		{"no repository at all", func(a *unstructured.Unstructured, _ *Facts) {
			unstructured.RemoveNestedField(a.Object, "spec", "source")
		}, ReasonProjectForbids},
		{"a project for its own clusters only", func(_ *unstructured.Unstructured, f *Facts) {
			f.Project.Object["spec"].(map[string]any)["permitOnlyProjectScopedClusters"] = true
		}, ReasonProjectForbids},
		{"destination namespace not permitted", func(a *unstructured.Unstructured, _ *Facts) {
			_ = unstructured.SetNestedField(a.Object, "argocd", "spec", "destination", "namespace")
		}, ReasonProjectForbids},
		{"destination server from the annotation not permitted", func(a *unstructured.Unstructured, _ *Facts) {
			an := a.GetAnnotations()
			an[pullmodel.AnnotationDestinationServer] = "https://elsewhere"
			a.SetAnnotations(an)
		}, ReasonProjectForbids},
		{"destination denied by a ! entry", func(_ *unstructured.Unstructured, f *Facts) {
			f.Project.Object["spec"].(map[string]any)["destinations"] = []any{
				map[string]any{"server": "*", "namespace": "*"},
				map[string]any{"server": "*", "namespace": "!gb"},
			}
		}, ReasonProjectForbids},
		{"a regular expression matches nothing", func(_ *unstructured.Unstructured, f *Facts) {
			f.Project.Object["spec"].(map[string]any)["sourceNamespaces"] = []any{"/team-.*/"}
		}, ReasonProjectForbids},
	} {
		app, f := base()
		tc.edit(app, &f)
		got := Authorize(policy, app, f)
		switch {
		case tc.reason == "" && got != nil:
			t.Errorf("%s: refused: %v", tc.name, got)
		case tc.reason != "" && (got == nil || got.Reason != tc.reason):
			t.Errorf("%s: got %v, want reason %s", tc.name, got, tc.reason)
		case got != nil && strings.TrimSpace(got.Message) == "":
			t.Errorf("%s: refusal without a message", tc.name)
		}
	}
}

// TestSpokePlace: every Application lands in the configured spoke namespace; one from another
// hub namespace is named after its namespace too, so two namespaces' Applications never meet.
func TestSpokePlace(t *testing.T) {
	p := Policy{ArgoCDNamespace: "argocd", SpokeNamespace: "gitops"}
	app := hubApp()
	an := app.GetAnnotations()
	an[pullmodel.AnnotationAppNamespace] = "kube-system"
	app.SetAnnotations(an)
	if got := SpokePlace(p, app); got.Namespace != "gitops" || got.Name != "team-a.guestbook" {
		t.Errorf("team-a/guestbook lands at %s", got)
	}
	app.SetNamespace("argocd")
	if got := SpokePlace(p, app); got.Namespace != "gitops" || got.Name != "guestbook" {
		t.Errorf("argocd/guestbook lands at %s", got)
	}
	w, err := Build(Input{App: app, Spoke: SpokePlace(p, app)})
	if err != nil {
		t.Fatal(err)
	}
	if id := w.Spec.ManifestConfigs[0].ResourceIdentifier; id.Namespace != "gitops" || id.Name != "guestbook" {
		t.Errorf("feedback read from %s/%s", id.Namespace, id.Name)
	}
	if strings.Contains(string(w.Spec.Workload.Manifests[0].Raw), "kube-system") {
		t.Error("the namespace the author asked for is in the payload")
	}
}

// TestAppSealFieldsAreWhatBuildSeals: the fields a legacy ManifestWork is sealed with, derived
// from the Application alone, are those a delivery seals, with and without an ApplicationSet.
func TestAppSealFieldsAreWhatBuildSeals(t *testing.T) {
	plain := hubApp()
	owned := hubApp()
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "set", UID: "u"}})
	for _, app := range []*unstructured.Unstructured{plain, owned} {
		w, err := Build(Input{App: app})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := appSealFields(app), SealFields(w); got != want {
			t.Errorf("appSealFields %+v, Build seals %+v", got, want)
		}
	}
	if appSealFields(owned).ApplicationSet == "" {
		t.Error("an ApplicationSet's Application is sealed without its set")
	}
}
