package docs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// example is one object of an examples/*.yaml file.
type example struct {
	file string
	obj  *unstructured.Unstructured
}

func (e example) String() string {
	name := e.obj.GetName()
	if ns := e.obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return e.file + ": " + e.obj.GetKind() + " " + name
}

// exampleFiles returns the paths of examples/*.yaml, failing when there are none.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples/*.yaml found")
	}
	sort.Strings(files)
	return files
}

// examples decodes every object of every example file. A file without an object, or one an
// object without apiVersion, kind or name, fails the test.
func examples(t *testing.T) []example {
	t.Helper()
	var out []example
	for _, path := range exampleFiles(t) {
		file := "examples/" + filepath.Base(path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		n := 0
		for {
			obj := map[string]any{}
			if err := dec.Decode(&obj); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: document %d: %v", file, n+1, err)
			}
			if len(obj) == 0 {
				continue
			}
			n++
			u := &unstructured.Unstructured{Object: obj}
			if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
				t.Errorf("%s: document %d lacks apiVersion, kind or metadata.name", file, n)
				continue
			}
			out = append(out, example{file: file, obj: u})
		}
		if n == 0 {
			t.Errorf("%s holds no object", file)
		}
	}
	return out
}

// TestExamplesApply creates every object of examples/*.yaml on a real API server that serves
// the project's CRDs and those of OCM, Argo CD and cert-manager. Namespace objects are created;
// every other object is created with server-side dry run, so that examples showing the same
// object in different forms do not collide. Strict field validation turns an unknown or
// duplicate field into an error, which a plain create would drop silently. The namespaces the
// objects name are created first.
func TestExamplesApply(t *testing.T) {
	all := examples(t)
	env := testenv.StartForTest(t, testenv.Options{WithArgoCD: true, WithCertManager: true})
	c := env.Client
	ctx := context.Background()
	strict := client.FieldValidation(metav1.FieldValidationStrict)

	created := map[string]bool{}
	for _, e := range all {
		if e.obj.GetAPIVersion() != "v1" || e.obj.GetKind() != "Namespace" {
			continue
		}
		if err := c.Create(ctx, e.obj.DeepCopy(), strict); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				t.Errorf("%s: the API server refused it: %v", e, err)
				continue
			}
			// The same namespace in two examples: the second is checked by a dry-run update.
			cur := &corev1.Namespace{}
			if err := c.Get(ctx, client.ObjectKey{Name: e.obj.GetName()}, cur); err != nil {
				t.Fatal(err)
			}
			o := e.obj.DeepCopy()
			o.SetResourceVersion(cur.ResourceVersion)
			if err := c.Update(ctx, o, client.DryRunAll, strict); err != nil {
				t.Errorf("%s: the API server refused it: %v", e, err)
			}
		}
		created[e.obj.GetName()] = true
	}
	for _, e := range all {
		ns := e.obj.GetNamespace()
		if ns == "" || created[ns] {
			continue
		}
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating namespace %s: %v", ns, err)
		}
		created[ns] = true
	}

	for _, e := range all {
		if e.obj.GetAPIVersion() == "v1" && e.obj.GetKind() == "Namespace" {
			continue
		}
		namespaced, err := c.IsObjectNamespaced(e.obj)
		if err != nil {
			t.Errorf("%s: the API server does not serve this kind: %v", e, err)
			continue
		}
		if namespaced && e.obj.GetNamespace() == "" {
			t.Errorf("%s: a namespaced object must name its namespace", e)
			continue
		}
		if err := c.Create(ctx, e.obj.DeepCopy(), client.DryRunAll, strict); err != nil {
			t.Errorf("%s: the API server refused it: %v", e, err)
		}
	}
	t.Logf("%d objects of %d example files checked", len(all), len(exampleFiles(t)))
}

// TestDocYAMLIsInExamples: every yaml code block of README.md and docs/*.md that shows whole
// objects (its first line that is not a comment starts with "apiVersion:") is, word for word,
// in one of examples/*.yaml; what the pages show is then what TestExamplesApply applies.
// Blocks that show a part of an object (a spec fragment) are not checked.
func TestDocYAMLIsInExamples(t *testing.T) {
	var files []string
	for _, path := range exampleFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, string(data))
	}
	checked := 0
	for _, p := range pages(t) {
		blocks, _ := p.split()
		for _, b := range blocks {
			if b.info != "yaml" || !wholeObjects(b.lines) {
				continue
			}
			checked++
			want := strings.TrimSpace(strings.Join(b.lines, "\n"))
			found := false
			for _, f := range files {
				if strings.Contains(f, want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s:%d: this YAML is in no examples/*.yaml file; add it there (the test applies those) or make the two agree", p.rel, b.start)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no YAML object found in the pages: the parser is broken")
	}
	t.Logf("%d YAML blocks found in examples", checked)
}

// wholeObjects reports whether a YAML block starts with an object's apiVersion.
func wholeObjects(lines []string) bool {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		return strings.HasPrefix(l, "apiVersion:")
	}
	return false
}
