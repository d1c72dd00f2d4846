package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/cmd"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/cmp"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// renderHooks returns the chart's Helm hooks for the values, as a client-only dry-run install.
func renderHooks(t *testing.T, vals map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = releaseName, releaseNS
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.0", Major: "1", Minor: "36"}
	rel, err := install.Run(loadChart(t), vals)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, h := range rel.Hooks {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(h.Manifest), &u.Object); err != nil {
			t.Fatal(err)
		}
		out[u.GetName()] = u
	}
	return out
}

func jobArgs(t *testing.T, job *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("%s: containers %v", job.GetName(), containers)
	}
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}

// TestRenderCMPHealthCheckHooks: with the plugin on, the chart by default adds Helm hooks that
// write the ManifestWork health check into argocd-cm after install and upgrade and take it out
// before uninstall, with rights on that one ConfigMap only and arguments the binary accepts;
// cmp.healthCheck.install=false leaves them out.
func TestRenderCMPHealthCheckHooks(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"plugin off":          {},
		"health check off":    {"cmp": map[string]any{"enabled": true, "healthCheck": map[string]any{"install": false}}},
		"only the health off": {"cmp": map[string]any{"enabled": true, "healthCheck": map[string]any{"install": false}, "sidecar": map[string]any{"install": true}}},
	} {
		for n := range renderHooks(t, vals) {
			if strings.Contains(n, "cmp-health") {
				t.Errorf("%s: hook %s rendered", name, n)
			}
		}
	}

	vals := map[string]any{"cmp": map[string]any{"enabled": true}, "argoCD": map[string]any{"namespace": "gitops"}}
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	name := releaseName + "-cmp-health"
	role := find(objs, "Role", name)
	if role == nil || role.GetNamespace() != "gitops" {
		t.Fatalf("no Role for the health check hooks in the Argo CD namespace: %v", role)
	}
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if len(rules) != 1 {
		t.Fatalf("health check Role rules: %v", rules)
	}
	rule := rules[0].(map[string]any)
	if fmt.Sprint(rule["apiGroups"]) != "[]" || fmt.Sprint(rule["resources"]) != "[configmaps]" || fmt.Sprint(rule["resourceNames"]) != "[argocd-cm]" || fmt.Sprint(rule["verbs"]) != "[get patch]" {
		t.Errorf("health check Role rule: %v", rule)
	}
	if find(objs, "RoleBinding", name) == nil || find(objs, "ServiceAccount", name) == nil {
		t.Error("no RoleBinding or ServiceAccount for the health check hooks")
	}
	hooks := renderHooks(t, vals)
	for job, want := range map[string]struct {
		events string
		remove bool
	}{
		name + "-install": {"post-install,post-upgrade", false},
		name + "-remove":  {"pre-delete", true},
	} {
		j := hooks[job]
		if j == nil || j.GetKind() != "Job" || j.GetNamespace() != "gitops" {
			t.Fatalf("hook Job %s: %v", job, j)
		}
		if got := j.GetAnnotations()["helm.sh/hook"]; got != want.events {
			t.Errorf("%s runs on %q, want %q", job, got, want.events)
		}
		if sa, _, _ := unstructured.NestedString(j.Object, "spec", "template", "spec", "serviceAccountName"); sa != name {
			t.Errorf("%s runs as %q", job, sa)
		}
		args := jobArgs(t, j)
		joined := strings.Join(args, " ")
		if !strings.HasPrefix(joined, "cmp install-health-check --namespace=gitops --config-map=argocd-cm") || strings.Contains(joined, "--remove") != want.remove {
			t.Errorf("%s args %q", job, joined)
		}
		c, rest, err := cmd.NewRootCommand().Find(args)
		if err != nil || c.Name() != "install-health-check" {
			t.Fatalf("%s: %v finds %v (%v)", job, args, c, err)
		}
		if err := c.ParseFlags(rest); err != nil {
			t.Errorf("%s: the binary refuses %v: %v", job, args, err)
		}
	}
}

// TestCMPHealthCheckHookWritesHealthLua runs the chart's health check hooks, with their
// arguments and as their ServiceAccount under the chart's Role, against a real API server
// holding an Argo CD argocd-cm: the entry written is health.lua as it is in the source tree,
// under Argo CD's key; Argo CD's other settings stay; a second run changes nothing; an older
// copy added by hand is replaced; and the uninstall hook takes the entry out and nothing else.
func TestCMPHealthCheckHookWritesHealthLua(t *testing.T) {
	const ns = "gitops"
	vals := map[string]any{"cmp": map[string]any{"enabled": true}, "argoCD": map[string]any{"namespace": ns}}
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	hooks := renderHooks(t, vals)
	name := releaseName + "-cmp-health"

	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true, WithoutProjectCRDs: true})
	ctx := context.Background()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
		o := find(objs, kind, name)
		if o == nil {
			t.Fatalf("no %s %s", kind, name)
		}
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", kind, err)
		}
	}
	hook := testenv.ServiceAccount(ns, name)
	kubeconfig, err := env.UserKubeconfigFile(t.TempDir(), "hook", hook.User, hook.Groups...)
	if err != nil {
		t.Fatal(err)
	}
	run := func(job string) error {
		t.Helper()
		j := hooks[name+"-"+job]
		if j == nil {
			t.Fatalf("no hook Job %s-%s", name, job)
		}
		root := cmd.NewRootCommand()
		root.SetArgs(append(jobArgs(t, j), "--kubeconfig="+kubeconfig))
		root.SetOut(&strings.Builder{})
		root.SetErr(&strings.Builder{})
		return root.ExecuteContext(ctx)
	}

	// No Argo CD yet: the install hook fails and says why; the uninstall hook has nothing to do.
	if err := run("install"); err == nil || !strings.Contains(err.Error(), "argocd-cm does not exist") {
		t.Fatalf("install without argocd-cm: %v", err)
	}
	if err := run("remove"); err != nil {
		t.Fatalf("remove without argocd-cm: %v", err)
	}

	settings := map[string]string{"url": "https://argocd.example.com", "resource.exclusions": "- kinds: [Event]\n"}
	argocdCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-cm"}, Data: settings}
	if err := c.Create(ctx, argocdCM, client.FieldOwner("argocd-install")); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "pkg", "pullmodel", "cmp", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	get := func() *corev1.ConfigMap {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(argocdCM), cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	checkOthers := func(cm *corev1.ConfigMap) {
		t.Helper()
		for k, v := range settings {
			if cm.Data[k] != v {
				t.Errorf("argocd-cm %s = %q, want %q (not the hook's)", k, cm.Data[k], v)
			}
		}
	}

	if err := run("install"); err != nil {
		t.Fatal(err)
	}
	cm := get()
	if cm.Data["resource.customizations.health.work.open-cluster-management.io_ManifestWork"] != string(want) || cmp.HealthCheckKey != "resource.customizations.health.work.open-cluster-management.io_ManifestWork" {
		t.Fatalf("argocd-cm entry is not health.lua:\n%s", cm.Data[cmp.HealthCheckKey])
	}
	checkOthers(cm)
	if len(cm.Data) != len(settings)+1 {
		t.Errorf("argocd-cm keys after install: %d, want %d", len(cm.Data), len(settings)+1)
	}

	// An upgrade runs it again: nothing is written.
	if err := run("install"); err != nil {
		t.Fatal(err)
	}
	if again := get(); again.ResourceVersion != cm.ResourceVersion {
		t.Errorf("a second install wrote argocd-cm (resourceVersion %s -> %s)", cm.ResourceVersion, again.ResourceVersion)
	}

	// An older entry someone pasted from `cmp health-check` is replaced.
	cm.Data[cmp.HealthCheckKey] = "return {status = \"Healthy\"}\n"
	if err := c.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	if err := run("install"); err != nil {
		t.Fatal(err)
	}
	if got := get().Data[cmp.HealthCheckKey]; got != string(want) {
		t.Fatalf("an older entry stayed:\n%s", got)
	}

	// Uninstall: the entry goes, Argo CD's settings stay; a second run has nothing to do.
	for range 2 {
		if err := run("remove"); err != nil {
			t.Fatal(err)
		}
	}
	cm = get()
	if _, ok := cm.Data[cmp.HealthCheckKey]; ok {
		t.Error("the uninstall hook left the health check in argocd-cm")
	}
	checkOthers(cm)
	if len(cm.Data) != len(settings) {
		t.Errorf("argocd-cm keys after remove: %v", cm.Data)
	}
}
