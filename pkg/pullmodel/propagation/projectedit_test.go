package propagation_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// projectCopies returns the spec of the AppProject name as each of the pull model's
// ManifestWorks in cluster's namespace carries it, by ManifestWork name.
func projectCopies(ctx context.Context, cluster, name string) (map[string]map[string]any, error) {
	list := &workv1.ManifestWorkList{}
	if err := s.Client.List(ctx, list, client.InNamespace(cluster), client.HasLabels{pullmodel.LabelPull}); err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, w := range list.Items {
		if w.DeletionTimestamp != nil {
			continue
		}
		for _, m := range w.Spec.Workload.Manifests {
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal(m.Raw, &u.Object); err != nil {
				return nil, err
			}
			if u.GetKind() == "AppProject" && u.GetName() == name {
				spec, _ := u.Object["spec"].(map[string]any)
				out[w.Name] = spec
			}
		}
	}
	return out, nil
}

// projectEverywhere reports whether each cluster has at least one copy of the AppProject and
// every copy there has the description want.
func projectEverywhere(ctx context.Context, clusters []string, name, want string) (bool, string) {
	for _, c := range clusters {
		copies, err := projectCopies(ctx, c, name)
		if err != nil {
			return false, err.Error()
		}
		if len(copies) == 0 {
			return false, c + ": no ManifestWork carries the AppProject"
		}
		for w, spec := range copies {
			if spec["description"] != want {
				return false, fmt.Sprintf("%s: ManifestWork %s carries description %v", c, w, spec["description"])
			}
		}
	}
	return true, ""
}

// workWrites is the API server's count of ManifestWork writes (status writes apart).
func workWrites(tb testing.TB) int {
	tb.Helper()
	return s.Writes(tb)["manifestworks"]
}

// waitQuiet waits until no ManifestWork has been written for a while.
func waitQuiet(tb testing.TB) {
	tb.Helper()
	last, since := workWrites(tb), time.Now()
	poll.UntilState(tb, "no ManifestWork writes for 2s", 5*time.Minute, func(context.Context) (bool, string) {
		if n := workWrites(tb); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > 2*time.Second, fmt.Sprint(last, " writes")
	})
}

// sharedProjectApps creates an AppProject and, on each cluster, n Applications naming it, and
// waits until every Application has its ManifestWork and each cluster has the AppProject.
func sharedProjectApps(tb testing.TB, project string, clusters []string, n int) {
	tb.Helper()
	ctx := context.Background()
	p := pulltest.AppProject(pulltest.ArgoNS, project, nil)
	p.Object["spec"].(map[string]any)["description"] = "first"
	s.Create(tb, p)
	for _, c := range clusters {
		s.Create(tb, pulltest.ManagedCluster(c))
		s.Create(tb, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c}})
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(clusters)*n)
	next := make(chan [2]any)
	for range 8 {
		wg.Go(func() {
			for job := range next {
				app := pulltest.NewApp(fmt.Sprintf("%s-%05d", job[0], job[1]), job[0].(string))
				_ = unstructured.SetNestedField(app.Object, project, "spec", "project")
				if err := s.Client.Create(ctx, app); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, c := range clusters {
		for i := range n {
			next <- [2]any{c, i}
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	poll.UntilState(tb, "every Application delivered with its AppProject", 10*time.Minute, func(ctx context.Context) (bool, string) {
		for _, c := range clusters {
			list := &workv1.ManifestWorkList{}
			if err := s.Client.List(ctx, list, client.InNamespace(c), client.HasLabels{pullmodel.LabelPull}); err != nil {
				return false, err.Error()
			}
			apps := 0
			for _, w := range list.Items {
				if w.Annotations[pullmodel.AnnotationHubAppName] != "" {
					apps++
				}
			}
			if apps != n {
				return false, fmt.Sprintf("%s: %d of %d Applications delivered", c, apps, n)
			}
		}
		return projectEverywhere(ctx, clusters, project, "first")
	})
}

// appWorkVersions returns the resourceVersion of every Application's ManifestWork on the
// clusters.
func appWorkVersions(tb testing.TB, clusters []string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for _, c := range clusters {
		list := &workv1.ManifestWorkList{}
		if err := s.Client.List(context.Background(), list, client.InNamespace(c), client.HasLabels{pullmodel.LabelPull}); err != nil {
			tb.Fatal(err)
		}
		for _, w := range list.Items {
			if w.Annotations[pullmodel.AnnotationHubAppName] != "" {
				out[c+"/"+w.Name] = w.ResourceVersion
			}
		}
	}
	return out
}

// editProject sets the hub AppProject's description.
func editProject(tb testing.TB, name, description string) {
	tb.Helper()
	patch := fmt.Sprintf(`{"spec":{"description":%q}}`, description)
	if err := s.Client.Patch(context.Background(), pulltest.AppProject(pulltest.ArgoNS, name, nil), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		tb.Fatal(err)
	}
}

// TestSharedProjectEditWritesOneWorkPerCluster: ten Applications on each of two clusters name
// one hub AppProject. Editing it reaches both clusters with one ManifestWork write each, not
// one per Application, and no Application's own ManifestWork is rewritten.
func TestSharedProjectEditWritesOneWorkPerCluster(t *testing.T) {
	clusters := []string{"shared-edit1", "shared-edit2"}
	sharedProjectApps(t, "shared-edit", clusters, 10)
	waitQuiet(t)
	versions := appWorkVersions(t, clusters)
	before := workWrites(t)
	editProject(t, "shared-edit", "edited")
	poll.UntilState(t, "the edit on both clusters", 30*time.Second, func(ctx context.Context) (bool, string) {
		return projectEverywhere(ctx, clusters, "shared-edit", "edited")
	})
	waitQuiet(t)
	if n := workWrites(t) - before; n != len(clusters) {
		t.Errorf("editing an AppProject that 10 Applications on each of %d clusters share cost %d ManifestWork writes, want %d (one per cluster)", len(clusters), n, len(clusters))
	}
	after := appWorkVersions(t, clusters)
	rewritten := 0
	for k, v := range versions {
		if after[k] != v {
			rewritten++
		}
	}
	if rewritten > 0 {
		t.Errorf("editing the AppProject rewrote %d of %d Applications' ManifestWorks, want none", rewritten, len(versions))
	}
}

var benchApps = flag.Int("pullmodel.bench-apps", 1000, "Applications on one cluster sharing one AppProject in BenchmarkSharedAppProjectEdit")

var benchOnce struct {
	sync.Once
	edits int
}

// BenchmarkSharedAppProjectEdit: -pullmodel.bench-apps Applications (1,000) on one cluster
// share one hub AppProject; each operation edits the project once and waits until every
// ManifestWork that carries it carries the edit (the time per operation). It reports the
// manager's ManifestWork writes and the bytes of their request bodies per edit (the simulated
// work agents are paused meanwhile; the API server's own counters), and the ManifestWorks of the
// cluster: how many and their total size as stored (JSON, managed fields and status included).
func BenchmarkSharedAppProjectEdit(b *testing.B) {
	const project, cluster = "bench-shared", "bench-edit1"
	benchOnce.Do(func() { sharedProjectApps(b, project, []string{cluster}, *benchApps) })
	waitQuiet(b)
	var writes, body float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s.Agent.SetPaused(true)
		w0, by0 := workWrites(b), workBodyBytes(b)
		benchOnce.edits++
		want := fmt.Sprintf("edit %d", benchOnce.edits)
		b.StartTimer()
		editProject(b, project, want)
		poll.UntilState(b, "the edit in every ManifestWork", 10*time.Minute, func(ctx context.Context) (bool, string) {
			return projectEverywhere(ctx, []string{cluster}, project, want)
		})
		b.StopTimer()
		waitQuiet(b)
		writes += float64(workWrites(b) - w0)
		body += workBodyBytes(b) - by0
		s.Agent.SetPaused(false)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(writes/float64(b.N), "work-writes/edit")
	b.ReportMetric(body/float64(b.N), "work-bytes-written/edit")
	list := &workv1.ManifestWorkList{}
	if err := s.Client.List(context.Background(), list, client.InNamespace(cluster), client.HasLabels{pullmodel.LabelPull}); err != nil {
		b.Fatal(err)
	}
	stored := 0
	for i := range list.Items {
		raw, err := json.Marshal(&list.Items[i])
		if err != nil {
			b.Fatal(err)
		}
		stored += len(raw)
	}
	b.ReportMetric(float64(len(list.Items)), "works")
	b.ReportMetric(float64(stored), "work-bytes-stored")
}

// workBodyBytes is the sum of the request bodies the API server has read for ManifestWork
// writes (its apiserver_request_body_size_bytes histogram).
func workBodyBytes(tb testing.TB) float64 {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	sum := 0.0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_body_size_bytes_sum{") || !strings.Contains(line, `resource="manifestworks"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			tb.Fatal(err)
		}
		sum += v
	}
	return sum
}
