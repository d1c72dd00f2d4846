package fleet

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MarkDeploymentAvailable writes the status of Deployment ns/name on managed cluster `cluster`
// as if all its replicas were running and available.
//
// This simulates the kubelet (and the deployment and replicaset controllers): the fleet has no
// nodes, so no pod ever runs. It is the ONLY thing the fleet fakes; everything else (API
// servers, CSR signing, OCM registration, placement, addon manager, work agent) is the real
// binary. The status describes the Deployment's current generation; after the Deployment
// changes (a new ManifestWork revision), call it again.
func (f *Fleet) MarkDeploymentAvailable(ctx context.Context, cluster, ns, name string) error {
	c, err := f.SpokeClient(cluster)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return fmt.Errorf("%s: getting deployment %s/%s: %w", cluster, ns, name, err)
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		now := metav1.Now()
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration:  d.Generation,
			Replicas:            replicas,
			UpdatedReplicas:     replicas,
			ReadyReplicas:       replicas,
			AvailableReplicas:   replicas,
			UnavailableReplicas: 0,
			Conditions: []appsv1.DeploymentCondition{
				{
					Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
					Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability (simulated by test/fleet).",
					LastUpdateTime: now, LastTransitionTime: now,
				},
				{
					Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
					Reason: "NewReplicaSetAvailable", Message: "Simulated by test/fleet: no kubelet runs here.",
					LastUpdateTime: now, LastTransitionTime: now,
				},
			},
		}
		return c.Status().Update(ctx, d)
	})
}
