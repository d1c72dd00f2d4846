package cmp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/yaml"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: guestbook, namespace: demo}
spec:
  selector: {matchLabels: {app: guestbook}}
  template:
    metadata: {labels: {app: guestbook}}
    spec: {containers: [{name: web, image: nginx}]}
`

func guestbook() map[string]string {
	return map[string]string{
		"app/deploy.yaml": deployment,
		// Several documents, an empty one and comments.
		"app/svc.yml": `# the service
---
apiVersion: v1
kind: Service
metadata: {name: guestbook, namespace: demo}
spec: {ports: [{port: 80}]}
---
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: blue}
`,
		// A JSON List, in a nested folder.
		"app/nested/more/list.json": `{"apiVersion":"v1","kind":"List","items":[
  {"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"runner","namespace":"demo"}},
  {"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"reader"},"rules":[]}]}`,
		// Namespaces go first whatever the file order.
		"app/z-namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: demo}\n",
		// Not manifests, or hidden: ignored.
		"app/README.md":        "# guestbook",
		"app/.hidden/x.yaml":   "not: [valid",
		"app/.git/config.yaml": "not: [valid",
		"app/empty.yaml":       "", // empty file: nothing
	}
}

func TestGenerateDeliversAFolderToEveryCluster(t *testing.T) {
	dir := writeFiles(t, guestbook())
	out, err := Generate(filepath.Join(dir, "app"), Options{Clusters: []string{"cluster2", "cluster1", "cluster1"}, Name: "guestbook", Application: "argocd/guestbook", Namespace: "fallback"})
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(out), "---\n")
	if len(docs) != 2 {
		t.Fatalf("want one ManifestWork per cluster, got %d:\n%s", len(docs), out)
	}
	var works []workv1.ManifestWork
	for _, d := range docs {
		var w workv1.ManifestWork
		if err := yaml.UnmarshalStrict([]byte(d), &w); err != nil {
			t.Fatalf("output is not a ManifestWork: %v\n%s", err, d)
		}
		works = append(works, w)
	}
	if works[0].Namespace != "cluster1" || works[1].Namespace != "cluster2" || works[0].Name != WorkBase(Options{Name: "guestbook", Application: "argocd/guestbook"})+"-0" {
		t.Fatalf("works = %s/%s, %s/%s", works[0].Namespace, works[0].Name, works[1].Namespace, works[1].Name)
	}
	if works[0].Kind != "ManifestWork" || works[0].APIVersion != "work.open-cluster-management.io/v1" {
		t.Fatalf("type = %s %s", works[0].APIVersion, works[0].Kind)
	}
	if works[0].Annotations[AnnotationApplication] != "argocd/guestbook" || works[0].Annotations[AnnotationPart] != "1/1" {
		t.Fatalf("annotations = %v", works[0].Annotations)
	}
	if len(works[0].Labels) != 1 || works[0].Labels[LabelApplication] != "guestbook" {
		t.Fatalf("labels = %v: Argo CD owns these works, they carry only the Application's label", works[0].Labels)
	}
	var got []string
	for _, m := range works[0].Spec.Workload.Manifests {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name, Namespace string
			} `json:"metadata"`
		}
		if err := json.Unmarshal(m.Raw, &o); err != nil {
			t.Fatal(err)
		}
		got = append(got, o.Kind+":"+o.Metadata.Namespace+"/"+o.Metadata.Name)
	}
	want := []string{
		"Namespace:/demo",
		"Deployment:demo/guestbook",
		"ServiceAccount:demo/runner",
		"ClusterRole:/reader",
		"Service:demo/guestbook",
		"ConfigMap:fallback/settings",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("manifests\n got %v\nwant %v", got, want)
	}

	// Deterministic: the same folder gives the same bytes.
	again, err := Generate(filepath.Join(dir, "app"), Options{Clusters: []string{"cluster1", "cluster2"}, Name: "guestbook", Application: "argocd/guestbook", Namespace: "fallback"})
	if err != nil || !bytes.Equal(out, again) {
		t.Fatalf("second run differs (err %v)", err)
	}
}

func TestBadInputIsRefusedWithTheFileAndDocument(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		opts  Options
		want  []string
	}{
		"bad YAML": {
			files: map[string]string{"a.yaml": deployment + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n"},
			want:  []string{"a.yaml (document 2)", "not valid YAML"},
		},
		"no kind": {
			files: map[string]string{"dir/b.yml": "apiVersion: v1\nmetadata: {name: x}\n"},
			want:  []string{"dir/b.yml", "kind is missing"},
		},
		"generateName": {
			files: map[string]string{"c.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata: {generateName: run-}\n"},
			want:  []string{"c.yaml", "generateName"},
		},
		"a list at the top": {
			files: map[string]string{"d.json": `[{"apiVersion":"v1"}]`},
			want:  []string{"d.json", "must be a YAML mapping"},
		},
		"duplicate object": {
			files: map[string]string{"e.yaml": deployment, "f.yaml": deployment},
			want:  []string{"f.yaml", "also defined in e.yaml"},
		},
		"nothing to deliver": {
			files: map[string]string{"notes.txt": "hello"},
			want:  []string{"no Kubernetes manifests"},
		},
		"no cluster": {
			files: map[string]string{"a.yaml": deployment},
			opts:  Options{Name: "x"},
			want:  []string{"no target cluster", "CLUSTERS"},
		},
		"bad cluster name": {
			files: map[string]string{"a.yaml": deployment},
			opts:  Options{Name: "x", Clusters: []string{"Cluster_1"}},
			want:  []string{`cluster "Cluster_1"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			opts := tc.opts
			if opts.Name == "" && opts.Clusters == nil {
				opts = Options{Name: "x", Clusters: []string{"c1"}}
			}
			_, err := Generate(writeFiles(t, tc.files), opts)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func configMapOfSize(name string, bytes int) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: demo}\ndata: {blob: " + strings.Repeat("x", bytes) + "}\n---\n"
}

func TestLargeFoldersAreSplitAndOversizedObjectsRefused(t *testing.T) {
	// Ten objects of about 100 KiB: 400 KiB per work makes three works, filled in order.
	var b strings.Builder
	for i := range 10 {
		b.WriteString(configMapOfSize(string(rune('a'+i)), 100*1024))
	}
	works, err := Render(mustLoad(t, map[string]string{"big.yaml": b.String()}), Options{Name: "big", Clusters: []string{"c1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(works) != 4 {
		t.Fatalf("got %d works, want 4 (3+3+3+1 objects of ~100 KiB)", len(works))
	}
	total := 0
	for i, w := range works {
		size := 0
		for _, m := range w.Spec.Workload.Manifests {
			size += len(m.Raw)
		}
		if size > DefaultMaxWorkBytes {
			t.Errorf("work %s holds %d bytes, over the budget", w.Name, size)
		}
		if want := "big-" + string(rune('0'+i)); w.Name != want {
			t.Errorf("work %d is named %s, want %s", i, w.Name, want)
		}
		total += len(w.Spec.Workload.Manifests)
	}
	if total != 10 {
		t.Fatalf("%d objects delivered, want 10", total)
	}

	// One object over the budget is refused, naming it.
	_, err = Render(mustLoad(t, map[string]string{"huge.yaml": configMapOfSize("huge", 450*1024)}), Options{Name: "big", Clusters: []string{"c1"}})
	if err == nil || !strings.Contains(err.Error(), "ConfigMap demo/huge") || !strings.Contains(err.Error(), "huge.yaml") {
		t.Fatalf("oversized object: %v", err)
	}
}

func TestOptionsFromArgoCDEnvironment(t *testing.T) {
	env := map[string]string{
		"ARGOCD_APP_NAME":      "guestbook",
		"ARGOCD_APP_NAMESPACE": "guestbook", // the destination's namespace
		"ARGOCD_ENV_CLUSTERS":  "cluster1, cluster2",
		"ARGOCD_ENV_NAMESPACE": "demo",
	}
	o := OptionsFromEnv(func(k string) string { return env[k] })
	if strings.Join(o.Clusters, ",") != "cluster1,cluster2" || o.Name != "guestbook" || o.Application != "guestbook" || o.Namespace != "demo" {
		t.Fatalf("options = %+v", o)
	}
	long := strings.Repeat("a", 260)
	if n := WorkName(long); len(n)+3 > 253 || n == WorkName(long+"b") {
		t.Fatalf("long names: %q", n)
	}
}

func mustLoad(t *testing.T, files map[string]string) []object {
	t.Helper()
	objs, err := Load(writeFiles(t, files))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestWorkNamesAreTheApplicationsOwn: whatever base name an Application's plugin settings ask
// for, its works never carry the name of another Application's works, of a pull-model work or
// of an addon's work.
func TestWorkNamesAreTheApplicationsOwn(t *testing.T) {
	objs := mustLoad(t, map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n"})
	names := map[string]string{}
	for _, o := range []Options{
		// Argo CD names Applications outside its own namespace "<namespace>_<name>".
		{Name: "guestbook", Application: "guestbook"},
		{Name: "guestbook", Application: "team-b_guestbook"},
		// Asking for the name of OCM's addon work, or of another Application's.
		{Name: "addon-argocd-agent-deploy", Application: "team-b_evil"},
		{Name: "guestbook", Application: "team-b_evil"},
	} {
		o.Clusters = []string{"c1"}
		works, err := Render(objs, o)
		if err != nil {
			t.Fatal(err)
		}
		n := works[0].Name
		if prev, ok := names[n]; ok {
			t.Errorf("%s and %s both write ManifestWork %s", prev, o.Application, n)
		}
		names[n] = o.Application
		if n == "addon-argocd-agent-deploy-0" || n == "guestbook-0" {
			t.Errorf("%s writes ManifestWork %s, a name it chose outright", o.Application, n)
		}
	}
}
