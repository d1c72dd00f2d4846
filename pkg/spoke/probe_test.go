package spoke

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/jsonpath"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
	sigsjson "sigs.k8s.io/json"
)

// TestProbeIsReadOnly: a probe never writes to the cluster: every manifest is ReadOnly, and its
// feedback paths parse as the work agent parses them and read the addon's label (a key with
// dots) and the first container's image.
func TestProbeIsReadOnly(t *testing.T) {
	w, err := BuildProbe("probe", "c1", "argocd", "k", map[string]string{"x": "y"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Namespace != "c1" || w.Labels[LabelProbe] != "k" || w.Labels["x"] != "y" {
		t.Errorf("metadata %+v", w.ObjectMeta)
	}
	if len(w.Spec.ManifestConfigs) != len(w.Spec.Workload.Manifests) || len(w.Spec.Workload.Manifests) != 4 {
		t.Fatalf("%d manifests, %d configs", len(w.Spec.Workload.Manifests), len(w.Spec.ManifestConfigs))
	}
	sts := map[string]any{"metadata": map[string]any{"labels": map[string]any{LabelInstalledBy: "addon"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "img:1"}}}}}}
	for i, c := range w.Spec.ManifestConfigs {
		if c.UpdateStrategy == nil || c.UpdateStrategy.Type != workv1.UpdateStrategyTypeReadOnly {
			t.Errorf("manifest %d (%s) is not read-only: %+v", i, c.ResourceIdentifier.Resource, c.UpdateStrategy)
		}
		var m map[string]any
		if err := json.Unmarshal(w.Spec.Workload.Manifests[i].Raw, &m); err != nil {
			t.Fatal(err)
		}
		md := m["metadata"].(map[string]any)
		if md["name"] != c.ResourceIdentifier.Name || (md["namespace"] != nil && md["namespace"] != c.ResourceIdentifier.Namespace) {
			t.Errorf("manifest %d %v does not match its config %+v", i, md, c.ResourceIdentifier)
		}
		for _, p := range c.FeedbackRules[0].JsonPaths {
			jp := jsonpath.New(p.Name).AllowMissingKeys(true)
			if err := jp.Parse("{" + p.Path + "}"); err != nil {
				t.Fatalf("%s: %v", p.Path, err)
			}
			res, err := jp.FindResults(sts)
			if err != nil || len(res) != 1 || len(res[0]) != 1 {
				t.Fatalf("%s: %v %v", p.Path, res, err)
			}
			want := map[string]string{FeedbackInstalledBy: "addon", FeedbackImage: "img:1"}[p.Name]
			if got := res[0][0].Interface(); got != want {
				t.Errorf("%s reads %v, want %s", p.Path, got, want)
			}
		}
	}
}

func probeStatus(w *workv1.ManifestWork, present []bool, installedBy []string) {
	w.Generation = 1
	w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, ObservedGeneration: 1}}
	w.Status.ResourceStatus.Manifests = nil
	for i, c := range w.Spec.ManifestConfigs {
		st := metav1.ConditionFalse
		if present[i] {
			st = metav1.ConditionTrue
		}
		reason := "ResourceAvailable"
		if !present[i] {
			reason = "ResourceNotAvailable"
		}
		mc := workv1.ManifestCondition{ResourceMeta: workv1.ManifestResourceMeta{Kind: "K" + c.ResourceIdentifier.Resource, Resource: c.ResourceIdentifier.Resource,
			Name: c.ResourceIdentifier.Name, Namespace: c.ResourceIdentifier.Namespace},
			Conditions: []metav1.Condition{{Type: workv1.ManifestAvailable, Status: st, Reason: reason, ObservedGeneration: 1}}}
		if installedBy[i] != "" {
			mc.StatusFeedbacks.Values = []workv1.FeedbackValue{{Name: FeedbackInstalledBy, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(installedBy[i])}}}
		}
		w.Status.ResourceStatus.Manifests = append(w.Status.ResourceStatus.Manifests, mc)
	}
}

func TestReadProbe(t *testing.T) {
	w, _ := BuildProbe("probe", "c1", "argocd", "k", nil)
	if v, _ := ReadProbe(w, "addon"); v != ProbeUnknown {
		t.Errorf("no status: %v", v)
	}
	probeStatus(w, []bool{false, false, false, false}, []string{"", "", "", ""})
	if v, _ := ReadProbe(w, "addon"); v != ProbeClear {
		t.Errorf("nothing there: %v", v)
	}
	probeStatus(w, []bool{true, true, false, true}, []string{"addon", "addon", "", "addon"})
	if v, _ := ReadProbe(w, "addon"); v != ProbeClear {
		t.Errorf("the addon's own: %v", v)
	}
	// Only the CRD, another namespace's Argo CD: installing would change it.
	probeStatus(w, []bool{false, false, false, true}, []string{"", "", "", ""})
	if v, found := ReadProbe(w, "addon"); v != ProbeForeign || !strings.Contains(found, "applications.argoproj.io") {
		t.Errorf("a foreign CRD: %v %q", v, found)
	}
	// Another addon's label is not this one's.
	probeStatus(w, []bool{true, false, false, false}, []string{"other-addon", "", "", ""})
	if v, found := ReadProbe(w, "addon"); v != ProbeForeign || !strings.Contains(found, "argocd/argocd-application-controller") {
		t.Errorf("another addon's: %v %q", v, found)
	}
	// A read that failed on the cluster is no answer (it must not read as absent).
	probeStatus(w, []bool{false, false, false, false}, []string{"", "", "", ""})
	w.Status.ResourceStatus.Manifests[0].Conditions[0].Status = metav1.ConditionUnknown
	w.Status.ResourceStatus.Manifests[0].Conditions[0].Reason = "FetchingResourceFailed"
	if v, _ := ReadProbe(w, "addon"); v != ProbeUnknown {
		t.Errorf("a failed read: %v", v)
	}
	// A status about other objects (the probe's namespace changed) is no answer.
	probeStatus(w, []bool{false, false, false, false}, []string{"", "", "", ""})
	w.Status.ResourceStatus.Manifests[0].ResourceMeta.Namespace = "old-namespace"
	if v, _ := ReadProbe(w, "addon"); v != ProbeUnknown {
		t.Errorf("a status of another namespace: %v", v)
	}
	// A report for an older generation, or a manifest not reported, is no answer.
	w.Generation = 2
	if v, _ := ReadProbe(w, "addon"); v != ProbeUnknown {
		t.Errorf("stale: %v", v)
	}
	probeStatus(w, []bool{false, false, false, false}, []string{"", "", "", ""})
	w.Status.ResourceStatus.Manifests = w.Status.ResourceStatus.Manifests[:3]
	if v, _ := ReadProbe(w, "addon"); v != ProbeUnknown {
		t.Errorf("partial: %v", v)
	}
}

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"quay.io/argoproj/argocd:v3.6.1":                    "v3.6.1",
		"registry:5000/argoproj/argocd:v3.4.3":              "v3.4.3",
		"registry:5000/argoproj/argocd":                     "",
		"quay.io/argoproj/argocd:v3.6.1@sha256:0123456789":  "v3.6.1",
		"quay.io/argoproj/argocd@sha256:0123456789abcdef00": "",
	} {
		if got := ImageTag(image); got != want {
			t.Errorf("%s: %q, want %q", image, got, want)
		}
	}
}

func TestProbeCurrent(t *testing.T) {
	w, _ := BuildProbe("probe", "c1", "argocd", "k", nil)
	if !ProbeCurrent(w, "argocd") {
		t.Errorf("a built probe is not current")
	}
	if ProbeCurrent(w, "gitops") {
		t.Errorf("a probe of argocd is current for gitops")
	}
	w.Spec.ManifestConfigs[0].UpdateStrategy.Type = workv1.UpdateStrategyTypeServerSideApply
	if ProbeCurrent(w, "argocd") {
		t.Errorf("a probe that would write is current")
	}
}

// TestTrimProbeKeepsWhatIsRead: a trimmed probe reads as the whole one does, in every state the
// probe tests use, and the trim drops the manifests' bodies and the feedback rules.
func TestTrimProbeKeepsWhatIsRead(t *testing.T) {
	states := []struct {
		present     []bool
		installedBy []string
		image       string
	}{
		{[]bool{false, false, false, false}, []string{"", "", "", ""}, ""},
		{[]bool{true, true, false, true}, []string{"addon", "addon", "", "addon"}, "quay.io/argoproj/argocd:v3.6.1"},
		{[]bool{false, false, false, true}, []string{"", "", "", ""}, ""},
		{[]bool{true, false, false, false}, []string{"other", "", "", ""}, "quay.io/argoproj/argocd:v3.4.3"},
	}
	for i, s := range states {
		whole, err := BuildProbe("probe", "c1", "argocd", "k", nil)
		if err != nil {
			t.Fatal(err)
		}
		probeStatus(whole, s.present, s.installedBy)
		for j := range whole.Status.ResourceStatus.Manifests {
			m := &whole.Status.ResourceStatus.Manifests[j]
			m.Conditions[0].Message = "a message the work agent writes"
			if s.image != "" && m.ResourceMeta.Name == "argocd-application-controller" {
				m.ResourceMeta.Kind = "StatefulSet"
				m.StatusFeedbacks.Values = append(m.StatusFeedbacks.Values, workv1.FeedbackValue{Name: FeedbackImage, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(s.image)}})
			}
		}
		trimmed, err := TrimProbe(whole.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		tw := trimmed.(*workv1.ManifestWork)
		wantV, wantFound := ReadProbe(whole, "addon")
		if v, found := ReadProbe(tw, "addon"); v != wantV || found != wantFound {
			t.Errorf("state %d: ReadProbe %v %q, want %v %q", i, v, found, wantV, wantFound)
		}
		if got, want := ProbeCurrent(tw, "argocd"), ProbeCurrent(whole, "argocd"); got != want || !want {
			t.Errorf("state %d: ProbeCurrent %v, want %v (true)", i, got, want)
		}
		if got, want := ProbedControllerImage(tw), ProbedControllerImage(whole); got != want || (want == "") != (s.image == "" || !s.present[0]) {
			t.Errorf("state %d: ProbedControllerImage %q, want %q", i, got, want)
		}
		for j := range tw.Spec.Workload.Manifests {
			if tw.Spec.Workload.Manifests[j].Raw != nil || tw.Spec.ManifestConfigs[j].FeedbackRules != nil {
				t.Fatalf("state %d: manifest %d kept its body or feedback rules", i, j)
			}
		}
	}
}

// TestTrimProbeSharesWhatEveryProbeRepeats: probes of one install namespace share one copy of
// their manifest configs and of their emptied manifests; another namespace's probes do not
// share the first ones' configs.
func TestTrimProbeSharesWhatEveryProbeRepeats(t *testing.T) {
	trim := func(cluster, namespace string) *workv1.ManifestWork {
		t.Helper()
		whole, err := BuildProbe("probe", cluster, namespace, "k", nil)
		if err != nil {
			t.Fatal(err)
		}
		trimmed, err := TrimProbe(whole)
		if err != nil {
			t.Fatal(err)
		}
		return trimmed.(*workv1.ManifestWork)
	}
	a, b, other := trim("c1", "argocd"), trim("c2", "argocd"), trim("c3", "gitops")
	if unsafe.SliceData(a.Spec.ManifestConfigs) != unsafe.SliceData(b.Spec.ManifestConfigs) {
		t.Error("two probes of one namespace keep a copy each of their manifest configs")
	}
	if unsafe.SliceData(a.Spec.Workload.Manifests) != unsafe.SliceData(b.Spec.Workload.Manifests) {
		t.Error("two probes keep a copy each of their emptied manifests")
	}
	if unsafe.SliceData(a.Spec.ManifestConfigs) == unsafe.SliceData(other.Spec.ManifestConfigs) {
		t.Error("a probe of another namespace shares the configs of argocd's probes")
	}
	if !ProbeCurrent(a, "argocd") || !ProbeCurrent(b, "argocd") || !ProbeCurrent(other, "gitops") || ProbeCurrent(other, "argocd") {
		t.Error("shared configs changed what ProbeCurrent reads")
	}
	if n := len(a.Spec.Workload.Manifests); n != len(a.Spec.ManifestConfigs) || cap(a.Spec.Workload.Manifests) != n {
		t.Errorf("the emptied manifests are %d (capacity %d) for %d configs", n, cap(a.Spec.Workload.Manifests), len(a.Spec.ManifestConfigs))
	}
}

// BenchmarkTrimmedProbeRetained reports what one probe costs the cache: its JSON decoded and
// trimmed as the manager's cache does, 10,000 of them held, the heap measured after a
// collection ("retained-B/probe").
func BenchmarkTrimmedProbeRetained(b *testing.B) {
	whole, err := BuildProbe("argocd-components-probe", "cluster-00001", "argocd", "gitops.fleet", map[string]string{"app": "fleet"})
	if err != nil {
		b.Fatal(err)
	}
	whole.UID, whole.ResourceVersion = "0b7d9c1e-3f6a-4e2b-9a1c-5d8e7f6a4b3c", "123456"
	raw, err := json.Marshal(whole)
	if err != nil {
		b.Fatal(err)
	}
	const n = 10000
	for b.Loop() {
		held := make([]any, n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range held {
			w := &workv1.ManifestWork{}
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, w); err != nil {
				b.Fatal(err)
			}
			if held[i], err = TrimProbe(w); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "retained-B/probe")
		runtime.KeepAlive(held)
	}
}
