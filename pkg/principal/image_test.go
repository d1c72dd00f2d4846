package principal

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestImage(t *testing.T) {
	key := types.NamespacedName{Namespace: "argocd", Name: "argocd-agent-principal"}
	dep := func(containers ...corev1.Container) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		d.Spec.Template.Spec.Containers = containers
		return d
	}
	cases := []struct {
		name      string
		objects   []*appsv1.Deployment
		image     string
		wantFound bool
	}{
		{"no principal on this hub", nil, "", false},
		{"no container", []*appsv1.Deployment{dep()}, "", false},
		{"the principal's container, not the first", []*appsv1.Deployment{dep(corev1.Container{Name: "proxy", Image: "proxy:1"}, corev1.Container{Name: "principal", Image: "agent:v0.9.0"})}, "agent:v0.9.0", true},
		{"the chart's container name", []*appsv1.Deployment{dep(corev1.Container{Name: "argocd-agent-principal", Image: "agent:v0.9.1"})}, "agent:v0.9.1", true},
		{"else the first", []*appsv1.Deployment{dep(corev1.Container{Name: "main", Image: "mine:2"}, corev1.Container{Name: "side", Image: "side:1"})}, "mine:2", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			for _, o := range tc.objects {
				b = b.WithObjects(o)
			}
			image, found, err := Image(context.Background(), b.Build(), key)
			if err != nil || image != tc.image || found != tc.wantFound {
				t.Errorf("Image = %q, %v, %v; want %q, %v", image, found, err, tc.image, tc.wantFound)
			}
		})
	}
}
