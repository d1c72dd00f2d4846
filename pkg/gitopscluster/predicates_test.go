package gitopscluster

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestPrincipalDeploymentWatchIgnoresStatusChurn: the principal Deployment's status changes
// with every pod event; only a change of its pod template (the restart stamp the reconciler
// writes, or a person's edit) may wake the GitOpsClusters.
func TestPrincipalDeploymentWatchIgnoresStatusChurn(t *testing.T) {
	old := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{}}}
	old.Spec.Template.Annotations = map[string]string{"stamp": "a"}
	statusOnly := old.DeepCopy()
	statusOnly.Status.ReadyReplicas, statusOnly.Status.ObservedGeneration = 1, 7
	statusOnly.ResourceVersion = "2"
	restamped := old.DeepCopy()
	restamped.Spec.Template.Annotations["stamp"] = "b"

	p := podTemplateChanged()
	if p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: statusOnly}) {
		t.Error("a status-only update of the principal Deployment wakes the reconciler")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: restamped}) {
		t.Error("a pod template change of the principal Deployment is ignored")
	}
	if !p.Create(event.CreateEvent{Object: old}) || !p.Delete(event.DeleteEvent{Object: old}) {
		t.Error("creating or deleting the principal Deployment is ignored")
	}
}
