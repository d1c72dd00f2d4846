package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestPullModelAdmissionPolicy: the chart's ValidatingAdmissionPolicy, applied to a real API
// server with Argo CD's CRDs, refuses (Deny) a pull-model Application without skip-reconcile
// or without a cluster, with the policy's message, and admits a correct one and an unmarked
// one.
func TestPullModelAdmissionPolicy(t *testing.T) {
	objs, err := render(t, map[string]any{"pullModel": map[string]any{"admissionPolicy": "Deny"}})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true, WithoutOCM: true, WithArgoCD: true})
	ctx := context.Background()
	c := env.Client
	n := 0
	for _, o := range objs {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("creating %s: %v", o.GetKind(), err)
			}
			n++
		}
	}
	if n != 2 {
		t.Fatalf("rendered %d policy objects, want a policy and its binding", n)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}); err != nil {
		t.Fatal(err)
	}
	app := func(name string, labels, annotations map[string]string) *unstructured.Unstructured {
		a := pullmodel.NewApplication()
		a.SetNamespace("argocd")
		a.SetName(name)
		a.SetLabels(labels)
		a.SetAnnotations(annotations)
		a.Object["spec"] = map[string]any{"project": "default", "destination": map[string]any{"server": pullmodel.InClusterServer}}
		return a
	}
	marked := map[string]string{pullmodel.LabelPull: "true"}
	// The API server enforces a new policy once its informer has seen it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Create(ctx, app("probe", marked, map[string]string{pullmodel.AnnotationCluster: "c1"}))
		if err != nil && strings.Contains(err.Error(), "skip-reconcile") {
			break
		}
		if err == nil {
			_ = c.Delete(ctx, app("probe", nil, nil))
		}
		if time.Now().After(deadline) {
			t.Fatalf("an Application without skip-reconcile is still admitted: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	err = c.Create(ctx, app("no-cluster", marked, map[string]string{pullmodel.AnnotationSkipReconcile: "true"}))
	if err == nil || !strings.Contains(err.Error(), "must name its managed cluster") {
		t.Errorf("an Application naming no cluster: %v", err)
	}
	for name, a := range map[string]*unstructured.Unstructured{
		"good":     app("good", marked, map[string]string{pullmodel.AnnotationCluster: "c1", pullmodel.AnnotationSkipReconcile: "true"}),
		"unmarked": app("unmarked", nil, nil),
	} {
		if err := c.Create(ctx, a); err != nil {
			t.Errorf("%s Application refused: %v", name, err)
		}
	}
}
