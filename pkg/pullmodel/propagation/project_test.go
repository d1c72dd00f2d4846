package propagation

import (
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

// appWorkName matches the names of Applications' ManifestWorks: "-" and five hex digits of the
// UID last (pullmodel.WorkName).
var appWorkName = regexp.MustCompile(`-[0-9a-f]{5}$`)

// TestProjectWorkNames: a project ManifestWork's name is a valid name for every AppProject name,
// "<project>.appproject" when it fits, and never the name of an Application's ManifestWork.
func TestProjectWorkNames(t *testing.T) {
	long := strings.Repeat("a", 240) + "-b.c" + strings.Repeat("d", 9)
	for _, p := range []string{"team-a", "a.b", long, strings.Repeat("x", 253), strings.Repeat("a.", 126) + "a"} {
		n := ProjectWorkName(p)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("ProjectWorkName(%.20q...) = %q: %v", p, n, errs)
		}
		if !strings.HasSuffix(n, projectWorkSuffix) {
			t.Errorf("ProjectWorkName(%.20q...) = %q, want the suffix %s", p, n, projectWorkSuffix)
		}
		if appWorkName.MatchString(n) {
			t.Errorf("%q could be an Application's ManifestWork name", n)
		}
	}
	if !appWorkName.MatchString(pullmodel.WorkName("team-a", "0123456789")) {
		t.Error("appWorkName does not match an Application's ManifestWork name")
	}
	if n := ProjectWorkName("team-a"); n != "team-a.appproject" {
		t.Errorf("ProjectWorkName(team-a) = %q", n)
	}
	if ProjectWorkName(long) == ProjectWorkName(long+"e") {
		t.Error("two long project names share a ManifestWork name")
	}
}

// TestBuildProjectWork: the project ManifestWork carries the hub AppProject alone, into the
// cluster's Argo CD namespace, without its hub sourceNamespaces, applied with force and
// orphaned; one larger than a ManifestWork may carry is refused.
func TestBuildProjectWork(t *testing.T) {
	p := NewAppProject()
	p.SetNamespace("argocd")
	p.SetName("team-a")
	p.SetLabels(map[string]string{"hub": "only"})
	p.Object["spec"] = map[string]any{"sourceNamespaces": []any{"team-a"}, "sourceRepos": []any{"*"}}
	w, err := BuildProjectWork("c1", "gitops", p)
	if err != nil {
		t.Fatal(err)
	}
	if w.Namespace != "c1" || w.Name != "team-a.appproject" || w.Labels[pullmodel.LabelProjectWork] != "true" || w.Labels[pullmodel.LabelPull] != "true" || w.Annotations[pullmodel.AnnotationHubProject] != "team-a" {
		t.Errorf("ManifestWork %s/%s labels %v annotations %v", w.Namespace, w.Name, w.Labels, w.Annotations)
	}
	if len(w.Spec.Workload.Manifests) != 1 {
		t.Fatalf("%d manifests", len(w.Spec.Workload.Manifests))
	}
	spoke := string(w.Spec.Workload.Manifests[0].Raw)
	if !strings.Contains(spoke, `"namespace":"gitops"`) || strings.Contains(spoke, "sourceNamespaces") || strings.Contains(spoke, `"hub"`) {
		t.Errorf("spoke AppProject %s", spoke)
	}
	id := w.Spec.ManifestConfigs[0].ResourceIdentifier
	if id != (workv1.ResourceIdentifier{Group: "argoproj.io", Resource: "appprojects", Namespace: "gitops", Name: "team-a"}) || !w.Spec.ManifestConfigs[0].UpdateStrategy.ServerSideApply.Force {
		t.Errorf("manifest config %+v", w.Spec.ManifestConfigs[0])
	}
	if o := w.Spec.DeleteOption; o == nil || o.PropagationPolicy != workv1.DeletePropagationPolicyTypeSelectivelyOrphan || len(o.SelectivelyOrphan.OrphaningRules) != 1 || workv1.ResourceIdentifier(o.SelectivelyOrphan.OrphaningRules[0]) != id {
		t.Errorf("delete option %+v: the AppProject must be orphaned", o)
	}
	again, _ := BuildProjectWork("c1", "gitops", p)
	if NeedsUpdate(w, again) {
		t.Error("two builds of the same project differ")
	}
	p.Object["spec"].(map[string]any)["description"] = strings.Repeat("x", MaxWorkBytes)
	if _, err := BuildProjectWork("c1", "gitops", p); err == nil || !strings.Contains(err.Error(), `AppProject "team-a" is`) {
		t.Errorf("an AppProject over the limit: %v", err)
	}
}

// TestProjectApplied: an AppProject counts as on the cluster once the work agent reports it
// applied at the place the Application needs, whatever generation it reported; a failure is
// reported with its message.
func TestProjectApplied(t *testing.T) {
	p := NewAppProject()
	p.SetName("team-a")
	w, _ := BuildProjectWork("c1", "argocd", p)
	w.Generation = 3
	report := func(ns string, status metav1.ConditionStatus, msg string) {
		w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: status, ObservedGeneration: 2}}
		w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
			ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Resource: "appprojects", Namespace: ns, Name: "team-a"},
			Conditions:   []metav1.Condition{{Type: workv1.ManifestApplied, Status: status, Message: msg}},
		}}
	}
	if ProjectApplied(w, "argocd") {
		t.Error("applied without any status")
	}
	report("argocd", metav1.ConditionTrue, "")
	if !ProjectApplied(w, "argocd") || ProjectApplied(w, "gitops") {
		t.Error("applied in argocd must count there only")
	}
	if _, _, failed := ProjectApplyFailure(w); failed {
		t.Error("a failure reported while applied")
	}
	report("argocd", metav1.ConditionFalse, "forbidden")
	if ProjectApplied(w, "argocd") {
		t.Error("applied while the work agent reports a failure")
	}
	if msg, _, failed := ProjectApplyFailure(w); !failed || msg != "forbidden" {
		t.Errorf("failure %q %v", msg, failed)
	}
	report("argocd", metav1.ConditionTrue, "")
	now := metav1.Now()
	w.DeletionTimestamp = &now
	if ProjectApplied(w, "argocd") {
		t.Error("a ManifestWork being deleted counts")
	}
}

// TestProjectCopyOfAnEarlierDelivery: an Application's ManifestWork built with a copy of its
// project has the shape every one had before projects had ManifestWorks of their own (the
// Application, then the AppProject, orphaned), and is known as carrying it.
func TestProjectCopyOfAnEarlierDelivery(t *testing.T) {
	app := hubApp()
	app.Object["spec"].(map[string]any)["project"] = "team-a"
	p := NewAppProject()
	p.SetName("team-a")
	with, err := Build(Input{App: app, ProjectCopy: p})
	if err != nil {
		t.Fatal(err)
	}
	without, _ := Build(Input{App: app})
	if len(with.Spec.Workload.Manifests) != 2 || with.Spec.DeleteOption == nil || !carriesProjectCopy(with, "team-a") || carriesProjectCopy(with, "team-b") {
		t.Errorf("with a copy: %d manifests, delete option %+v", len(with.Spec.Workload.Manifests), with.Spec.DeleteOption)
	}
	if len(without.Spec.Workload.Manifests) != 1 || without.Spec.DeleteOption != nil || carriesProjectCopy(without, "team-a") {
		t.Errorf("without: %d manifests, delete option %+v", len(without.Spec.Workload.Manifests), without.Spec.DeleteOption)
	}
	if payloadProject(with) != "team-a" || payloadProject(without) != "team-a" {
		t.Errorf("payload project %q %q", payloadProject(with), payloadProject(without))
	}
	if !NeedsUpdate(with, without) {
		t.Error("dropping the copy is no update")
	}
}

// TestDeliveredProjectOfEveryWork: the index that keeps a project delivered under refused
// Applications reads the AppProject of the Application an Application's ManifestWork carries
// ("default" when it names none), and nothing of a project's ManifestWork.
func TestDeliveredProjectOfEveryWork(t *testing.T) {
	app := hubApp()
	app.Object["spec"].(map[string]any)["project"] = "team-a"
	w, err := Build(Input{App: app})
	if err != nil {
		t.Fatal(err)
	}
	if p := pullmodel.DeliveredProject(w); p != "team-a" {
		t.Errorf("DeliveredProject of an Application's ManifestWork = %q, want team-a", p)
	}
	delete(app.Object["spec"].(map[string]any), "project")
	if w, _ = Build(Input{App: app}); pullmodel.DeliveredProject(w) != pullmodel.DefaultProject {
		t.Errorf("DeliveredProject without a project = %q, want default", pullmodel.DeliveredProject(w))
	}
	project := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject", "metadata": map[string]any{"namespace": "argocd", "name": "team-a"}, "spec": map[string]any{}}}
	pw, err := BuildProjectWork("c1", "argocd", project)
	if err != nil {
		t.Fatal(err)
	}
	if p := pullmodel.DeliveredProject(pw); p != "" {
		t.Errorf("DeliveredProject of a project's ManifestWork = %q, want none", p)
	}
}
