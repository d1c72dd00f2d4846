package report

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
)

// TestSameStatusesAgreesWithDeepEqual: the report's comparison decides as
// equality.Semantic.DeepEqual does for a change of each field of the statuses, at every depth
// (so a field added to the API and not compared fails here), and for missing against empty
// lists.
func TestSameStatusesAgreesWithDeepEqual(t *testing.T) {
	base := func() reportv1alpha1.AppConditions {
		return reportv1alpha1.AppConditions{
			Resources:         []reportv1alpha1.ResourceRef{{APIVersion: "v1", Kind: "Service", Namespace: "apps", Name: "web"}},
			OmittedResources:  1,
			ClusterConditions: []reportv1alpha1.ClusterCondition{{Cluster: "c1", App: "argocd/web", SyncStatus: "Synced", HealthStatus: "Healthy", OperationStateStartedAt: "t", OperationStatePhase: "Succeeded", SyncRevision: "abc", Conditions: []reportv1alpha1.Condition{{Type: ConditionSyncError, Message: "m"}}}},
			OmittedClusters:   1,
			Summary:           reportv1alpha1.ReportSummary{Clusters: "1", Synced: "1", NotSynced: "0", Healthy: "1", NotHealthy: "0", InProgress: "0"},
		}
	}
	check := func(name string, a, b reportv1alpha1.AppConditions) {
		t.Helper()
		if got, want := sameStatuses(a, b), equality.Semantic.DeepEqual(a, b); got != want {
			t.Errorf("%s: sameStatuses %v, DeepEqual %v", name, got, want)
		}
	}
	check("equal", base(), base())
	// Every leaf field of the statuses, found by reflection, changed in turn.
	b0 := base()
	all := leaves(t, reflect.ValueOf(&b0).Elem(), "")
	for i, leaf := range all {
		b := base()
		v := leaves(t, reflect.ValueOf(&b).Elem(), "")[i].value
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int:
			v.SetInt(v.Int() + 1)
		}
		check("changed "+leaf.path, base(), b)
		if sameStatuses(base(), b) {
			t.Errorf("a change of %s is not seen", leaf.path)
		}
	}
	// Lists missing or empty, and of different lengths.
	empty, missing := base(), base()
	empty.Resources, empty.ClusterConditions = []reportv1alpha1.ResourceRef{}, []reportv1alpha1.ClusterCondition{}
	missing.Resources, missing.ClusterConditions = nil, nil
	check("empty against missing lists", empty, missing)
	noConds, emptyConds := base(), base()
	noConds.ClusterConditions[0].Conditions, emptyConds.ClusterConditions[0].Conditions = nil, []reportv1alpha1.Condition{}
	check("empty against missing conditions", noConds, emptyConds)
	longer := base()
	longer.ClusterConditions = append(longer.ClusterConditions, longer.ClusterConditions[0])
	check("one entry more", base(), longer)
}

type leaf struct {
	path  string
	value reflect.Value
}

// leaves lists the strings and numbers of v, a struct, at every depth, in field order. A list
// must have an item: a field added to the API as a list the test leaves empty would otherwise
// go unchanged, and uncompared.
func leaves(t *testing.T, v reflect.Value, path string) []leaf {
	switch v.Kind() {
	case reflect.Struct:
		var out []leaf
		for i := range v.NumField() {
			out = append(out, leaves(t, v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			t.Fatalf("%s: an empty list in the test's statuses; give it an item", path)
		}
		var out []leaf
		for i := range v.Len() {
			out = append(out, leaves(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.String, reflect.Int:
		return []leaf{{path, v}}
	default:
		t.Fatalf("%s: a field of kind %s, which this test does not change", path, v.Kind())
		return nil
	}
}

// TestFittingCountsAsEncoding: fitting keeps as many items as fit the budget as a JSON list,
// counting each item's encoding, the separators and the brackets, for every budget around the
// list's size and for strings JSON escapes (HTML characters, control characters, invalid UTF-8).
func TestFittingCountsAsEncoding(t *testing.T) {
	items := []reportv1alpha1.ClusterCondition{
		{Cluster: "c1", App: "argocd/a", SyncStatus: "Synced"},
		{Cluster: "c2", App: "argocd/<b>&", Conditions: []reportv1alpha1.Condition{{Type: ConditionSyncError, Message: "quote \" tab \t nul \x00 é \xff"}}},
		{Cluster: "c3", App: "argocd/c", HealthStatus: "Progressing"},
	}
	var sizes []int
	total := 0
	for _, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(raw)+1)
		total += len(raw) + 1
	}
	for budget := 0; budget <= total+2; budget++ {
		// k items: "[", each item and the comma or "]" after it.
		want, used := 0, 1
		for _, n := range sizes {
			if used+n > budget {
				break
			}
			used += n
			want++
		}
		if want > 0 {
			raw, _ := json.Marshal(items[:want])
			if len(raw) != used || len(raw) > budget {
				t.Fatalf("budget %d: %d items encode to %d bytes, counted %d", budget, want, len(raw), used)
			}
		}
		if got := fitting(items, budget); got != want {
			t.Fatalf("budget %d: %d items fit, want %d (sizes %v)", budget, got, want, sizes)
		}
	}
}

// TestRowMemo: a rebuild makes again only the rows of the ManifestWorks that are new or changed
// (their seal checked again), drops the rows of those gone, and a rebuild is found to have
// nothing new only when every ManifestWork, and the report, are at the versions the rows and
// the report last had.
func TestRowMemo(t *testing.T) {
	works := make([]workv1.ManifestWork, 3)
	for i := range works {
		works[i] = w(fmt.Sprintf("c%d", i), map[string]string{"syncStatus": "Synced"})
		works[i].UID = types.UID(fmt.Sprintf("uid-%d", i))
		works[i].ResourceVersion = "1"
	}
	var m rowMemo
	set := types.NamespacedName{Namespace: "argocd", Name: "apps"}
	var checked []string
	owned := func(w *workv1.ManifestWork) bool {
		checked = append(checked, w.Namespace)
		return true
	}
	rebuild := func(works []workv1.ManifestWork, wantChecked ...string) {
		t.Helper()
		checked = nil
		if rows := m.rows(set, works, owned); len(rows) != len(works) {
			t.Fatalf("%d rows for %d ManifestWorks", len(rows), len(works))
		}
		if fmt.Sprint(checked) != fmt.Sprint(wantChecked) {
			t.Fatalf("rows made again for %v, want %v", checked, wantChecked)
		}
	}
	rebuild(works, "c0", "c1", "c2")
	if m.unchanged(set, works, "10") {
		t.Fatal("nothing new before any report showed the rows")
	}
	m.shown(set, "10")
	if !m.unchanged(set, works, "10") {
		t.Fatal("something new with every ManifestWork and the report as they were")
	}
	changed := func(name string, works []workv1.ManifestWork, report string) {
		t.Helper()
		if m.unchanged(set, works, report) {
			t.Errorf("%s: nothing new", name)
		}
	}
	changed("another version of the report", works, "11")
	bumped := slices.Clone(works)
	bumped[1].ResourceVersion = "2"
	changed("a ManifestWork changed", bumped, "10")
	changed("a ManifestWork gone", works[:2], "10")
	extra := w("c3", nil)
	extra.UID, extra.ResourceVersion = "uid-3", "1"
	changed("a ManifestWork added", append(slices.Clone(works), extra), "10")
	deleting := slices.Clone(works)
	deleting[2].DeletionTimestamp = &metav1.Time{}
	changed("a ManifestWork being deleted", deleting, "10")

	rebuild(bumped, "c1")
	changed("rows made again and no report shown since", bumped, "10")
	m.shown(set, "12")
	rebuild(bumped[:2])
	m.shown(set, "13")
	if !m.unchanged(set, bumped[:2], "13") || m.unchanged(set, bumped, "13") {
		t.Error("the row of a ManifestWork gone was kept")
	}
	m.forget(set)
	changed("forgotten", bumped[:2], "13")
}

// BenchmarkRebuildWhileRolling: what a report rebuild costs while its ApplicationSet rolls:
// 100 ManifestWorks, one of which changed since the last rebuild; the rows, the statuses made
// from them, and the comparison with the report before.
func BenchmarkRebuildWhileRolling(b *testing.B) {
	const n = 100
	works := make([]workv1.ManifestWork, n)
	for i := range works {
		name := fmt.Sprintf("app-%03d", i)
		works[i] = w(fmt.Sprintf("cluster-%03d", i), map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "syncRevision": "0123456789abcdef",
			"operationStatePhase": "Succeeded", "operationStateStartedAt": "2026-01-01T00:00:00Z",
			"resourceList": resourcelist.Encode([]resourcelist.Resource{
				{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "apps", Name: name},
				{Version: "v1", Kind: "Service", Namespace: "apps", Name: name},
				{Version: "v1", Kind: "ConfigMap", Namespace: "apps", Name: name + "-settings"},
			})})
		works[i].UID = types.UID(name)
		works[i].ResourceVersion = "1"
	}
	var m rowMemo
	set := types.NamespacedName{Namespace: "argocd", Name: "apps"}
	owned := func(*workv1.ManifestWork) bool { return true }
	have := fromRows(m.rows(set, works, owned))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		works[i%n].ResourceVersion = fmt.Sprint(i + 2)
		want := fromRows(m.rows(set, works, owned))
		if !sameStatuses(have, want) {
			b.Fatal("the rebuild differs with nothing but a version changed")
		}
	}
}
