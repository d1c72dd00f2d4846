package addon

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
)

func manifest(t *testing.T, o map[string]any) workv1.Manifest {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	m := workv1.Manifest{}
	m.Raw = raw
	return m
}

// TestPodSettingsReachStatefulSetsAndInitContainers: node placement and resources reach every
// workload kind and every container, init containers included, which OCM's decorators miss;
// other objects keep their bytes.
func TestPodSettingsReachStatefulSetsAndInitContainers(t *testing.T) {
	sts := map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": "argocd-application-controller"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
			"containers":   []any{map[string]any{"name": "argocd-application-controller"}}}}}}
	redis := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "argocd-redis"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"initContainers": []any{map[string]any{"name": "secret-init"}},
			"containers":     []any{map[string]any{"name": "redis"}}}}}}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "argocd-cm"}}
	ms := []workv1.Manifest{manifest(t, sts), manifest(t, redis), manifest(t, cm)}
	cmBytes := string(ms[2].Raw)
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	big := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
	err := ApplyPodSettings(ms, PodSettings{
		NodeSelector: map[string]string{"node-role.kubernetes.io/infra": ""},
		Tolerations:  []corev1.Toleration{{Key: "infra", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Resources: []ContainerResources{
			{Workload: "*", Resources: small},
			{Workload: "argocd-application-controller", Container: "argocd-application-controller", Resources: big},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(ms[2].Raw) != cmBytes {
		t.Errorf("the ConfigMap was rewritten")
	}
	for i, name := range []string{"argocd-application-controller", "argocd-redis"} {
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(ms[i].Raw); err != nil {
			t.Fatal(err)
		}
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "spec", "nodeSelector")
		if _, ok := sel["node-role.kubernetes.io/infra"]; !ok || (i == 0 && sel["kubernetes.io/os"] != "linux") {
			t.Errorf("%s: nodeSelector %v", name, sel)
		}
		tol, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "tolerations")
		if len(tol) != 1 || tol[0].(map[string]any)["key"] != "infra" {
			t.Errorf("%s: tolerations %v", name, tol)
		}
		for _, field := range []string{"initContainers", "containers"} {
			list, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			for _, c := range list {
				res, _, _ := unstructured.NestedMap(c.(map[string]any), "resources")
				want := "64Mi"
				got, _, _ := unstructured.NestedString(res, "requests", "memory")
				if name == "argocd-application-controller" {
					want = "2Gi"
					got, _, _ = unstructured.NestedString(res, "limits", "memory")
				}
				if got != want {
					t.Errorf("%s %s %v: resources %v, want %s", name, field, c.(map[string]any)["name"], res, want)
				}
			}
		}
	}
}
