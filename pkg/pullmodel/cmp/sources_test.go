package cmp

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// names lists the objects as "Kind namespace/name".
func names(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.obj.GetKind()+" "+qualified(o.obj.GetNamespace(), o.obj.GetName()))
	}
	return out
}

func TestDetectSource(t *testing.T) {
	for want, files := range map[SourceType]map[string]string{
		SourceDirectory: {"deploy.yaml": deployment},
		SourceKustomize: {"kustomization.yaml": "resources: [deploy.yaml]\n", "deploy.yaml": deployment, "Chart.yaml": "name: x\n"},
		SourceHelm:      {"Chart.yaml": "apiVersion: v2\nname: x\nversion: 0.1.0\n", "templates/deploy.yaml": deployment},
	} {
		if got := DetectSource(writeFiles(t, files)); got != want {
			t.Errorf("files %v: %s, want %s", slices.Collect(func(yield func(string) bool) {
				for k := range files {
					if !yield(k) {
						return
					}
				}
			}), got, want)
		}
	}
}

// TestKustomizeOverlay: an overlay over a base in a sibling folder (as Argo CD checks out the
// whole repository) is built with its prefix, namespace and labels.
func TestKustomizeOverlay(t *testing.T) {
	root := writeFiles(t, map[string]string{
		"base/kustomization.yaml":          "resources: [deploy.yaml, service.yaml]\n",
		"base/deploy.yaml":                 deployment,
		"base/service.yaml":                "apiVersion: v1\nkind: Service\nmetadata: {name: guestbook-ui}\nspec: {ports: [{port: 80}], selector: {app: guestbook-ui}}\n",
		"overlays/prod/kustomization.yaml": "resources: [../../base]\nnamePrefix: prod-\nnamespace: team-a\nlabels: [{pairs: {env: prod}}]\n",
	})
	objs, err := LoadSource(filepath.Join(root, "overlays/prod"), DetectSource(filepath.Join(root, "overlays/prod")), "", HelmOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := names(objs)
	slices.Sort(got)
	if want := []string{"Deployment team-a/prod-guestbook", "Service team-a/prod-guestbook-ui"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	for _, o := range objs {
		if o.obj.GetLabels()["env"] != "prod" {
			t.Errorf("%s: labels %v", o.obj.GetName(), o.obj.GetLabels())
		}
	}
	// A kustomization that fails names kustomize.
	_, err = LoadSource(writeFiles(t, map[string]string{"kustomization.yaml": "resources: [missing.yaml]\n"}), SourceKustomize, "", HelmOptions{})
	if err == nil || !strings.Contains(err.Error(), "kustomize build") {
		t.Fatalf("broken kustomization: %v", err)
	}
}

const chartFiles = `apiVersion: v2
name: guestbook
version: 0.1.0
`

func helmChart(t *testing.T, extra map[string]string) string {
	t.Helper()
	files := map[string]string{
		"Chart.yaml":  chartFiles,
		"values.yaml": "replicas: 1\nimage: guestbook:v1\n",
		"templates/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}-ui, namespace: {{ .Release.Namespace }}}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: ui}}
  template:
    metadata: {labels: {app: ui}}
    spec: {containers: [{name: ui, image: {{ .Values.image | quote }}}]}
`,
		"templates/hook.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}-migrate\n  annotations: {\"helm.sh/hook\": pre-install}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: x}]}}}\n",
		"templates/NOTES.txt": "installed {{ .Release.Name }}\n",
		"crds/widget.yaml":    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec: {group: example.com, names: {kind: Widget, plural: widgets}, scope: Namespaced, versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]}\n",
		"values-prod.yaml":    "replicas: 3\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	return writeFiles(t, files)
}

// TestHelmChart: the chart is rendered as helm template --include-crds renders it, with the
// Application's release name and namespace, values files in order, then --set style
// parameters; hooks and NOTES are left out.
func TestHelmChart(t *testing.T) {
	dir := helmChart(t, nil)
	objs, err := LoadSource(dir, SourceHelm, "team-a", HelmOptions{ReleaseName: "gb", ValueFiles: []string{"values-prod.yaml"}, Set: []string{"image=guestbook:v2"}, KubeVersion: "1.36.0"})
	if err != nil {
		t.Fatal(err)
	}
	got := names(objs)
	if want := []string{"CustomResourceDefinition widgets.example.com", "Deployment team-a/gb-ui"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v (no hook, no NOTES)", got, want)
	}
	d := objs[1].obj
	replicas, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if fmt.Sprint(replicas) != "3" || len(containers) != 1 || containers[0].(map[string]any)["image"] != "guestbook:v2" {
		t.Errorf("replicas %v, containers %v: want the values file's 3 and the parameter's image", replicas, containers)
	}

	// Values files stay inside the chart folder, links included.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("replicas: 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"../secret.yaml", filepath.Join(outside, "secret.yaml"), "link.yaml"} {
		if _, err := LoadSource(dir, SourceHelm, "", HelmOptions{ReleaseName: "gb", ValueFiles: []string{f}}); err == nil || !strings.Contains(err.Error(), "chart folder") {
			t.Errorf("values file %s: %v, want refused", f, err)
		}
	}
	// A dependency that is not in charts/ is named, with what to do.
	dep := helmChart(t, map[string]string{"Chart.yaml": chartFiles + "dependencies:\n- {name: redis, version: 1.0.0, repository: https://charts.example.com}\n"})
	if _, err := LoadSource(dep, SourceHelm, "", HelmOptions{ReleaseName: "gb"}); err == nil || !strings.Contains(err.Error(), "charts/") || !strings.Contains(err.Error(), "redis") {
		t.Errorf("missing dependency: %v", err)
	}
	// A template error names helm.
	bad := helmChart(t, map[string]string{"templates/bad.yaml": "{{ .Values.nope.deeper }}\n"})
	if _, err := LoadSource(bad, SourceHelm, "", HelmOptions{ReleaseName: "gb"}); err == nil || !strings.Contains(err.Error(), "helm template") {
		t.Errorf("template error: %v", err)
	}
}

// TestGenerateRendersAHelmApplicationOutsideArgoCDsNamespace: the plugin's settings for an
// Application "team-a_guestbook" (Argo CD's instance name outside its namespace) render its chart
// as release "guestbook" into ManifestWorks named after that Application alone.
func TestGenerateRendersAHelmApplicationOutsideArgoCDsNamespace(t *testing.T) {
	dir := helmChart(t, nil)
	env := map[string]string{
		"ARGOCD_APP_NAME":        "team-a_guestbook",
		"ARGOCD_ENV_CLUSTERS":    "cluster1",
		"ARGOCD_ENV_NAMESPACE":   "team-a",
		"ARGOCD_ENV_HELM_VALUES": "values-prod.yaml",
		"ARGOCD_ENV_HELM_SET":    "image=guestbook:v3",
		"ARGOCD_ENV_SOURCE_TYPE": "helm",
		"KUBE_VERSION":           "1.36.3",
	}
	o := OptionsFromEnv(func(k string) string { return env[k] })
	if o.Helm.ReleaseName != "guestbook" || o.Name != "team-a-guestbook" || !slices.Equal(o.Helm.ValueFiles, []string{"values-prod.yaml"}) || o.Helm.KubeVersion != "1.36.3" {
		t.Fatalf("options %+v", o)
	}
	out, err := Generate(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	base := WorkBase(Options{Name: "team-a-guestbook", Application: "team-a_guestbook"})
	for _, want := range []string{"name: " + base + "-0", "namespace: cluster1", "guestbook-ui", "guestbook:v3", "replicas: 3"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if _, err := LoadSource(dir, "jsonnet", "", HelmOptions{}); err == nil || !strings.Contains(err.Error(), "unknown source type") {
		t.Errorf("unknown source type: %v", err)
	}
}
