package gitopscluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
)

// revokeAgents puts the client certificates the signer issued to clusters whose agent leaves
// this principal on the principal's TLS blocklist, before their cluster secrets go. Clusters
// now owned by another GitOpsCluster of the same principal keep their certificates.
func (r *Reconciler) revokeAgents(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, clusters []string) error {
	if len(clusters) == 0 {
		return nil
	}
	revoke, err := signer.ClustersToRevoke(ctx, r.Client, principalNS, clusters)
	if err != nil || len(revoke) == 0 {
		return err
	}
	if err := signer.Revoke(ctx, r.Client, principalNS, revoke, r.Config.Now()); err != nil {
		return fmt.Errorf("revoking the agent certificates of %s: %w", summarize(slices.Clone(revoke)), err)
	}
	r.event(goc, corev1.EventTypeNormal, "AgentCertificatesRevoked", "RevokeAgents",
		"blocked the agent client certificates of %s on the principal in %s", summarize(slices.Clone(revoke)), principalNS)
	return nil
}

// revokeOwnedAgents revokes, first thing when a GitOpsCluster is deleted, the agents of the
// clusters it has cluster secrets for.
func (r *Reconciler) revokeOwnedAgents(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	var secrets corev1.SecretList
	if err := r.Client.List(ctx, &secrets, client.InNamespace(names.PrincipalNamespace(goc)), client.MatchingLabels{
		v1alpha1.LabelOwnerNamespace: goc.Namespace, v1alpha1.LabelOwnerName: goc.Name,
	}); err != nil {
		return err
	}
	var agents []string
	for i := range secrets.Items {
		if c := secrets.Items[i].Labels[LabelAgentName]; c != "" {
			agents = append(agents, c)
		}
	}
	return r.revokeAgents(ctx, goc, names.PrincipalNamespace(goc), agents)
}

// pruneBlocklist drops expired certificates from the principal's blocklist. It is housekeeping:
// a failure is logged, not reported.
func (r *Reconciler) pruneBlocklist(ctx context.Context, principalNS string) {
	if err := signer.PruneBlocklist(ctx, r.Client, principalNS, r.Config.Now()); err != nil {
		log.FromContext(ctx).Error(err, "pruning the principal's TLS blocklist", "namespace", principalNS)
	}
}
