package chart

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/cmd"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/cmp"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

func placementGeneratorValues() map[string]any {
	return map[string]any{"argoCD": map[string]any{"namespace": "gitops"}, "applicationSet": map[string]any{"placementGenerator": map[string]any{"enabled": true}}}
}

func TestRenderPlacementGenerator(t *testing.T) {
	objs, err := render(t, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if find(objs, "ConfigMap", "ocm-placement-generator") != nil {
		t.Fatal("the placement generator ConfigMap is rendered by default")
	}

	objs, err = render(t, placementGeneratorValues())
	if err != nil {
		t.Fatal(err)
	}
	cm := find(objs, "ConfigMap", "ocm-placement-generator")
	if cm == nil {
		t.Fatal("no ocm-placement-generator ConfigMap")
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	want := map[string]string{
		"apiVersion":    "cluster.open-cluster-management.io/v1beta1",
		"kind":          "placementdecisions",
		"statusListKey": "decisions",
		"matchKey":      "clusterName",
	}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("data[%s] = %q, want %q", k, data[k], v)
		}
	}
	if cm.GetNamespace() != "gitops" {
		t.Errorf("ConfigMap namespace = %q, want the Argo CD namespace", cm.GetNamespace())
	}
	role := find(objs, "Role", releaseName+"-placementdecisions")
	if role == nil || role.GetNamespace() != "gitops" {
		t.Fatalf("no Role for PlacementDecisions in the Argo CD namespace: %v", role)
	}
	var r rbacv1.Role
	raw, _ := yaml.Marshal(role.Object)
	if err := yaml.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Rules) != 1 || !slices.Equal(r.Rules[0].Resources, []string{"placementdecisions"}) || !slices.Equal(r.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("rules = %+v, want read-only PlacementDecisions", r.Rules)
	}
	rb := find(objs, "RoleBinding", releaseName+"-placementdecisions")
	if rb == nil {
		t.Fatal("no RoleBinding")
	}
	subjects, _, _ := unstructured.NestedSlice(rb.Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "argocd-applicationset-controller" || subjects[0].(map[string]any)["namespace"] != "gitops" {
		t.Errorf("subjects = %v", subjects)
	}
	assertLeastPrivilege(t, objs)

	for name, vals := range map[string]map[string]any{
		"bad namespace":  {"argoCD": map[string]any{"namespace": "Argo CD"}},
		"enabled as str": {"applicationSet": map[string]any{"placementGenerator": map[string]any{"enabled": "yes"}}},
		"unknown value":  {"applicationSet": map[string]any{"placementGenrator": map[string]any{}}},
	} {
		if _, err := render(t, vals); err == nil {
			t.Errorf("%s: the schema accepted it", name)
		}
	}
}

// The rendered RBAC, applied to a real API server, lets the ApplicationSet controller read
// PlacementDecisions in the Argo CD namespace, and nowhere else.
func TestPlacementGeneratorRBACOnARealAPIServer(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true})
	ctx := context.Background()
	for _, ns := range []string{"gitops", "elsewhere"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := render(t, placementGeneratorValues())
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ConfigMap", "Role", "RoleBinding"} {
		for _, o := range objs {
			if o.GetKind() == kind && (kind != "ConfigMap" || o.GetName() == "ocm-placement-generator") && (kind == "ConfigMap" || strings.HasSuffix(o.GetName(), "-placementdecisions")) {
				if err := env.Client.Create(ctx, o); err != nil {
					t.Fatalf("creating %s %s: %v", kind, o.GetName(), err)
				}
			}
		}
	}
	controller := testenv.ServiceAccount("gitops", "argocd-applicationset-controller")
	decisions := func(ns, verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: "cluster.open-cluster-management.io", Resource: "placementdecisions"}
	}
	can := func(ns, verb string) bool {
		t.Helper()
		allowed, _, err := controller.Allowed(ctx, env.Client, decisions(ns, verb))
		if err != nil {
			t.Fatal(err)
		}
		return allowed
	}
	if err := controller.AwaitAllowed(ctx, env.Client, testenv.RBACCatchUp, decisions("gitops", "list"), decisions("gitops", "watch")); err != nil {
		t.Fatal(err)
	}
	if can("elsewhere", "list") || can("gitops", "update") {
		t.Error("the ApplicationSet controller got more than reading PlacementDecisions in the Argo CD namespace")
	}
}

// The chart's plugin.yaml is the one the binary prints, so the sidecar runs the command the
// binary has.
func TestRenderCMPPlugin(t *testing.T) {
	objs, err := render(t, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if find(objs, "ConfigMap", releaseName+"-cmp-plugin") != nil {
		t.Fatal("the plugin ConfigMap is rendered by default")
	}
	objs, err = render(t, map[string]any{"cmp": map[string]any{"enabled": true}, "argoCD": map[string]any{"namespace": "gitops"}})
	if err != nil {
		t.Fatal(err)
	}
	cm := find(objs, "ConfigMap", releaseName+"-cmp-plugin")
	if cm == nil || cm.GetNamespace() != "gitops" {
		t.Fatalf("no plugin ConfigMap in the Argo CD namespace: %v", cm)
	}
	got, _, _ := unstructured.NestedString(cm.Object, "data", "plugin.yaml")
	// The last document of a rendered stream loses its final newline; the text is what counts.
	if want := cmp.PluginConfig("/argocd-agent-addon"); strings.TrimSpace(got) != strings.TrimSpace(want) {
		t.Fatalf("chart plugin.yaml differs from the binary's:\n%q\nwant\n%q", got, want)
	}
	var plugin struct {
		APIVersion string                `json:"apiVersion"`
		Kind       string                `json:"kind"`
		Metadata   struct{ Name string } `json:"metadata"`
		Spec       struct {
			Version  string                     `json:"version"`
			Generate struct{ Command []string } `json:"generate"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict([]byte(got), &plugin); err != nil {
		t.Fatal(err)
	}
	if plugin.APIVersion != "argoproj.io/v1alpha1" || plugin.Kind != "ConfigManagementPlugin" || plugin.Metadata.Name+"-"+plugin.Spec.Version != cmp.PluginName+"-"+cmp.PluginVersion ||
		strings.Join(plugin.Spec.Generate.Command, " ") != "/argocd-agent-addon cmp generate" {
		t.Fatalf("plugin = %+v", plugin)
	}
}

// TestRenderCMPSidecarHooks: with cmp.sidecar.install the chart adds Helm hooks that put the
// plugin sidecar into the repo-server after install and upgrade and take it out before
// uninstall, with rights on that one Deployment only, and arguments the binary accepts.
func TestRenderCMPSidecarHooks(t *testing.T) {
	hooks := func(vals map[string]any) (*release.Release, []*unstructured.Unstructured) {
		t.Helper()
		install := action.NewInstall(&action.Configuration{})
		install.DryRun, install.ClientOnly, install.Replace = true, true, true
		install.ReleaseName, install.Namespace = releaseName, releaseNS
		install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.0", Major: "1", Minor: "36"}
		rel, err := install.Run(loadChart(t), vals)
		if err != nil {
			t.Fatal(err)
		}
		var out []*unstructured.Unstructured
		for _, h := range rel.Hooks {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(h.Manifest), &u.Object); err != nil {
				t.Fatal(err)
			}
			out = append(out, u)
		}
		return rel, out
	}
	if _, got := hooks(map[string]any{"cmp": map[string]any{"enabled": true, "healthCheck": map[string]any{"install": false}}}); len(got) != 0 {
		t.Fatalf("hooks rendered without cmp.sidecar.install: %v", got)
	}
	vals := map[string]any{"cmp": map[string]any{"enabled": true, "sidecar": map[string]any{"install": true}}, "argoCD": map[string]any{"namespace": "gitops"}}
	_, jobs := hooks(vals)
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	role := find(objs, "Role", releaseName+"-cmp-sidecar")
	if role == nil || role.GetNamespace() != "gitops" {
		t.Fatalf("no Role for the sidecar hooks in the Argo CD namespace: %v", role)
	}
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if len(rules) != 1 {
		t.Fatalf("sidecar Role rules: %v", rules)
	}
	rule := rules[0].(map[string]any)
	if fmt.Sprint(rule["resources"]) != "[deployments]" || fmt.Sprint(rule["resourceNames"]) != "[argocd-repo-server]" || fmt.Sprint(rule["verbs"]) != "[get patch]" {
		t.Errorf("sidecar Role rule: %v", rule)
	}
	if find(objs, "RoleBinding", releaseName+"-cmp-sidecar") == nil || find(objs, "ServiceAccount", releaseName+"-cmp-sidecar") == nil {
		t.Error("no RoleBinding or ServiceAccount for the sidecar hooks")
	}
	byName := map[string]*unstructured.Unstructured{}
	for _, j := range jobs {
		byName[j.GetName()] = j
	}
	for name, want := range map[string]struct {
		events string
		remove bool
	}{
		releaseName + "-cmp-sidecar-install": {"post-install,post-upgrade", false},
		releaseName + "-cmp-sidecar-remove":  {"pre-delete", true},
	} {
		j := byName[name]
		if j == nil || j.GetKind() != "Job" || j.GetNamespace() != "gitops" {
			t.Fatalf("hook Job %s: %v", name, j)
		}
		if got := j.GetAnnotations()["helm.sh/hook"]; got != want.events {
			t.Errorf("%s runs on %q, want %q", name, got, want.events)
		}
		containers, _, _ := unstructured.NestedSlice(j.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		joined := strings.Join(args, " ")
		for _, w := range []string{"cmp install-sidecar", "--namespace=gitops", "--deployment=argocd-repo-server", "--config-map=" + releaseName + "-cmp-plugin", "--image="} {
			if !strings.Contains(joined, w) {
				t.Errorf("%s args %q lack %q", name, joined, w)
			}
		}
		if strings.Contains(joined, "--remove") != want.remove {
			t.Errorf("%s args %q: --remove should be %v", name, joined, want.remove)
		}
		// The binary accepts exactly these arguments.
		root := cmd.NewRootCommand()
		c, rest, err := root.Find(args)
		if err != nil || c.Name() != "install-sidecar" {
			t.Fatalf("%s: %v finds %v (%v)", name, args, c, err)
		}
		if err := c.ParseFlags(rest); err != nil {
			t.Errorf("%s: the binary refuses %v: %v", name, args, err)
		}
	}
}
