package clustersecrets

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/clusterlabels"
)

// withClusterLabels adds the ManagedCluster's labels to a cluster secret about to be written, so
// that ApplicationSet cluster generators on the hub can fan out to agents by them. The
// ManagedCluster is read from the cache; a cluster not (yet) known gets none.
func (w *Writer) withClusterLabels(ctx context.Context, s *corev1.Secret, cluster string) error {
	mc := &clusterv1.ManagedCluster{}
	if err := w.Client.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading ManagedCluster %s: %w", cluster, err)
	}
	s.Labels, s.Annotations, _ = clusterlabels.Apply(s.Labels, s.Annotations, mc.Labels)
	return nil
}

// SetupLabelSync follows ManagedClusters' label changes onto their agent cluster secrets:
// one write per changed cluster, apart from the GitOpsCluster reconcile (which rewrites a secret
// only to renew it).
func SetupLabelSync(ctx context.Context, mgr ctrl.Manager) error {
	return clusterlabels.SetupSync(ctx, mgr, "agent-cluster-labels", clusterlabels.Lookup{Label: v1alpha1.LabelAgentName}, func(o client.Object) string {
		l := o.GetLabels()
		if l[v1alpha1.LabelSecretType] != "cluster" || l[v1alpha1.LabelOwnerName] == "" {
			return ""
		}
		return l[v1alpha1.LabelAgentName]
	})
}
