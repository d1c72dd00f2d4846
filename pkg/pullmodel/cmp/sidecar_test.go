package cmp_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/cmp"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestSidecarInstallAndRemove applies the sidecar to a repo-server Deployment on a real API
// server: it is added beside what Argo CD put there, a second install changes nothing (no new
// rollout), and removing it takes back exactly what was added.
func TestSidecarInstallAndRemove(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true, WithoutProjectCRDs: true})
	ctx := context.Background()
	c := env.Client
	dyn := dynamic.NewForConfigOrDie(env.Config)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}); err != nil {
		t.Fatal(err)
	}
	side := cmp.Sidecar{Namespace: "argocd", Deployment: "argocd-repo-server", Image: "argocd-agent-addon:test", ConfigMap: "addon-cmp-plugin"}

	// No repo-server yet: a clear error, and nothing is created.
	if err := side.Apply(ctx, dyn, true); err == nil {
		t.Fatal("installing into a missing Deployment did not fail")
	}

	labels := map[string]string{"app.kubernetes.io/name": "argocd-repo-server"}
	repo := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "argocd-repo-server"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "argocd-repo-server", Image: "quay.io/argoproj/argocd:v3.4.3",
						VolumeMounts: []corev1.VolumeMount{{Name: "var-files", MountPath: "/var/run/argocd"}, {Name: "plugins", MountPath: "/home/argocd/cmp-server/plugins"}}}},
					Volumes: []corev1.Volume{
						{Name: "var-files", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "plugins", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
	if err := c.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	get := func() *appsv1.Deployment {
		t.Helper()
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(repo), d); err != nil {
			t.Fatal(err)
		}
		return d
	}

	if err := side.Apply(ctx, dyn, true); err != nil {
		t.Fatal(err)
	}
	d := get()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 2 || spec.Containers[0].Name != "argocd-repo-server" || spec.Containers[1].Name != cmp.SidecarContainerName {
		t.Fatalf("containers after install: %+v", spec.Containers)
	}
	sc := spec.Containers[1]
	if sc.Image != side.Image || len(sc.Command) != 1 || sc.Command[0] != "/var/run/argocd/argocd-cmp-server" {
		t.Errorf("sidecar: image %s, command %v", sc.Image, sc.Command)
	}
	mounts := map[string]string{}
	for _, m := range sc.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["var-files"] != "/var/run/argocd" || mounts["plugins"] != "/home/argocd/cmp-server/plugins" ||
		mounts[cmp.SidecarContainerName+"-plugin"] != "/home/argocd/cmp-server/config/plugin.yaml" || mounts["cmp-tmp"] != "/tmp" {
		t.Errorf("sidecar mounts: %v", mounts)
	}
	if sc.SecurityContext == nil || sc.SecurityContext.RunAsNonRoot == nil || !*sc.SecurityContext.RunAsNonRoot {
		t.Errorf("sidecar security context: %+v", sc.SecurityContext)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	if v := vols[cmp.SidecarContainerName+"-plugin"]; v.ConfigMap == nil || v.ConfigMap.Name != side.ConfigMap {
		t.Errorf("plugin.yaml volume: %+v", v)
	}
	if len(vols) != 4 {
		t.Errorf("volumes after install: %v", spec.Volumes)
	}

	// Again: nothing changes, so the repo-server is not rolled a second time.
	gen := d.Generation
	if err := side.Apply(ctx, dyn, true); err != nil {
		t.Fatal(err)
	}
	if g := get().Generation; g != gen {
		t.Errorf("a second install changed the Deployment: generation %d -> %d", gen, g)
	}

	// Removed: exactly what was added goes; Argo CD's own container and volumes stay.
	if err := side.Apply(ctx, dyn, false); err != nil {
		t.Fatal(err)
	}
	spec = get().Spec.Template.Spec
	if len(spec.Containers) != 1 || spec.Containers[0].Name != "argocd-repo-server" || len(spec.Containers[0].VolumeMounts) != 2 {
		t.Errorf("containers after removal: %+v", spec.Containers)
	}
	if len(spec.Volumes) != 2 || spec.Volumes[0].Name != "var-files" || spec.Volumes[1].Name != "plugins" {
		t.Errorf("volumes after removal: %+v", spec.Volumes)
	}
	// Removing when the Deployment is gone (Argo CD uninstalled first) is not an error.
	if err := c.Delete(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if err := side.Apply(ctx, dyn, false); err != nil {
		t.Errorf("removing from a missing Deployment: %v", err)
	}
}
